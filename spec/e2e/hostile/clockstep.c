/* LD_PRELOAD shim for hostile/10-clock-step: once the file named by
 * $CLOCKSTEP_FILE exists, the wall clock (CLOCK_REALTIME, gettimeofday)
 * reads $CLOCKSTEP_SECS ahead, as after an NTP step or a VM's time sync;
 * CLOCK_MONOTONIC is left alone. The file is looked for at most every
 * 50 ms of monotonic time. A test tool: built by the test, never shipped. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>

static int (*real_clock_gettime)(clockid_t, struct timespec *);
static int stepped;
static long step_by;
static long long next_look_ns;

static long
offset(void)
{
    if (__atomic_load_n(&stepped, __ATOMIC_ACQUIRE))
        return step_by;
    struct timespec m;
    real_clock_gettime(CLOCK_MONOTONIC, &m);
    long long now = (long long)m.tv_sec * 1000000000LL + m.tv_nsec;
    if (now < __atomic_load_n(&next_look_ns, __ATOMIC_RELAXED))
        return 0;
    __atomic_store_n(&next_look_ns, now + 50000000LL, __ATOMIC_RELAXED);
    const char *file = getenv("CLOCKSTEP_FILE"), *secs = getenv("CLOCKSTEP_SECS");
    struct stat st;
    if (file == NULL || stat(file, &st) != 0)
        return 0;
    step_by = secs != NULL ? atol(secs) : 40;
    __atomic_store_n(&stepped, 1, __ATOMIC_RELEASE);
    return step_by;
}

int
clock_gettime(clockid_t id, struct timespec *ts)
{
    if (real_clock_gettime == NULL)
        real_clock_gettime = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int r = real_clock_gettime(id, ts);
    if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        ts->tv_sec += offset();
    return r;
}

int
gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    struct timespec ts;
    (void)tz;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}
