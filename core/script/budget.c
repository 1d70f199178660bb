#include <stdio.h>
#include <time.h>

#include "script/script_int.h"

/* The count hook fires every BUDGET_STEP instructions. Once the budget is
 * spent it re-arms on every instruction, so a pcall inside the script cannot
 * swallow the error: each handler it runs trips again (Redis'
 * luaMaskCountHook does the same). */
#define BUDGET_STEP 1000

/* A call's wall-clock limit: a floor plus 100 ns an instruction, which a
 * slow machine still runs in. It catches the work the instruction count
 * does not see: C functions that are slow but charge nothing (a full
 * collection, a concatenation of big strings), and a loaded machine's
 * worst case in the charged ones. */
#define TIME_FLOOR_NS 50000000ull
#define TIME_PER_INSTRUCTION_NS 100ull

/* The coarse clock (a few ms of resolution, against limits of 50 ms and
 * up) costs 7 ns where the precise one costs 17, and every route() call
 * reads it once. */
static uint64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void hook(lua_State *L, lua_Debug *ar);

/* Records why the call must end (|level| names the culprit's line) and
 * makes every later instruction raise it again. */
static void
trip(lua_State *L, struct script *s, int level, int timed_out)
{
    s->tripped = 1;
    luaL_where(L, level);
    if (timed_out)
        snprintf(s->trip_msg, sizeof(s->trip_msg), "%stime limit exceeded (%llu ms)",
                 lua_tostring(L, -1), (unsigned long long)(s->time_limit_ns / 1000000));
    else
        snprintf(s->trip_msg, sizeof(s->trip_msg), "%sinstruction budget exceeded (%u instructions)",
                 lua_tostring(L, -1), s->budget);
    lua_pop(L, 1);
    lua_sethook(L, hook, LUA_MASKCOUNT, 1);
    lua_sethook(s->L, hook, LUA_MASKCOUNT, 1); /* so coroutine.resume cannot swallow it */
}

static void
hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    struct script *s = script_of(L);
    if (!s->tripped) {
        s->used += BUDGET_STEP;
        /* Level 0 in a hook is the running Lua function: its line is the
         * culprit, and every re-raise below names it, not the line of the
         * pcall that caught the first one. */
        if (s->used >= s->budget)
            trip(L, s, 0, 0);
        else if (now_ns() > s->deadline_ns)
            trip(L, s, 0, 1);
        else
            return;
    }
    lua_pushstring(L, s->trip_msg);
    lua_error(L);
}

void
script_budget_charge(lua_State *L, uint64_t units)
{
    struct script *s = script_of(L);
    if (!s->armed)
        return;
    if (!s->tripped) {
        uint64_t before = s->used;
        s->used = units > UINT64_MAX - before ? UINT64_MAX : before + units;
        /* Level 1: the Lua code that called the charging C function. */
        if (s->used >= s->budget)
            trip(L, s, 1, 0);
        else if (((s->used ^ before) >> 10) == 0 && units < 1024)
            return; /* the clock is read once per 1024 units */
        else if (now_ns() > s->deadline_ns)
            trip(L, s, 1, 1);
        else
            return;
    }
    lua_pushstring(L, s->trip_msg);
    lua_error(L);
}

void
script_budget_arm(struct script *s, uint32_t budget)
{
    s->budget = budget;
    s->used = 0;
    s->tripped = 0;
    s->armed = 1;
    s->time_limit_ns = TIME_FLOOR_NS + (uint64_t)budget * TIME_PER_INSTRUCTION_NS;
    s->deadline_ns = now_ns() + s->time_limit_ns;
    lua_sethook(s->L, hook, LUA_MASKCOUNT, BUDGET_STEP);
}

void
script_budget_disarm(struct script *s)
{
    lua_sethook(s->L, NULL, 0, 0);
    s->tripped = 0;
    s->armed = 0;
}

int
script_msgh(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TSTRING) {
        const char *t = luaL_typename(L, 1);
        lua_pushfstring(L, "(error object is a %s value)", t);
    }
    return 1;
}
