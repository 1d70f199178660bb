local M = {}
function M.f()
  return 1 +
end
return M
