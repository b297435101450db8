/* Where the GUI thread waits for the GIL: an LD_PRELOAD shim for bench/gil_sites.py.
 *
 * It wraps the two calls by which a thread takes the GIL back: PyGILState_Ensure (C++ calling into
 * Python: a Python override Qt calls, a slot, a queued call's cleanup) and PyEval_RestoreThread (a
 * Python call into Qt returning, PySide having released the GIL around it). While recording is on,
 * each call on the recording thread is counted, with the time it waited, by call site: the first
 * frame outside Python, Shiboken and PySide, the two named frames above it, and (for a return) the
 * Python line that made the call. Build: see bench/gil_sites.py; nothing here runs in the app.
 */
#define _GNU_SOURCE
#include <Python.h>
#include <frameobject.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define SLOTS 8192
#define DEPTH 24

typedef PyGILState_STATE (*ensure_fn)(void);
typedef void (*restore_fn)(PyThreadState *);

static ensure_fn real_ensure;
static restore_fn real_restore;
static int recording;
static pthread_t recorder;

struct site {
    void *where;          /* first frame outside the Python bindings */
    void *above[2];       /* the next two frames with a symbol name */
    char python[160];     /* the Python line, for a return into Python */
    int kind;             /* 0: entry (Ensure), 1: return (RestoreThread) */
    long count;
    double wait_ms;
};
static struct site sites[SLOTS];

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int bindings(const char *file) {
    return strstr(file, "shiboken") || strstr(file, "libpyside") || strstr(file, "libpython")
        || strstr(file, "gil_shim");
}

/* The call site: frames 0-1 are this file's. */
static __attribute__((noinline)) void locate(void **where, void **above) {
    void *frames[DEPTH];
    int n = backtrace(frames, DEPTH);
    *where = NULL;
    above[0] = above[1] = NULL;
    for (int i = 2; i < n; i++) {
        Dl_info info;
        if (!dladdr(frames[i], &info) || !info.dli_fname || bindings(info.dli_fname))
            continue;
        *where = frames[i];
        for (int j = i + 1, k = 0; j < n && k < 2; j++)
            if (dladdr(frames[j], &info) && info.dli_sname)
                above[k++] = frames[j];
        return;
    }
}

static void python_line(char *out, size_t size) {
    out[0] = 0;
    PyFrameObject *frame = PyEval_GetFrame();
    if (!frame)
        return;
    PyCodeObject *code = PyFrame_GetCode(frame);
    snprintf(out, size, "%s:%s:%d", PyUnicode_AsUTF8(code->co_filename),
             PyUnicode_AsUTF8(code->co_name), PyFrame_GetLineNumber(frame));
    Py_DECREF(code);
}

static void count(int kind, void *where, void **above, const char *python, double waited) {
    unsigned long h = (unsigned long)where * 31 + kind;
    for (const char *p = python; *p; p++)
        h = h * 131 + (unsigned char)*p;
    for (int probe = 0; probe < SLOTS; probe++) {
        struct site *s = &sites[(h + probe) % SLOTS];
        if (s->count == 0) {
            s->where = where;
            s->above[0] = above[0];
            s->above[1] = above[1];
            s->kind = kind;
            snprintf(s->python, sizeof s->python, "%s", python);
        } else if (s->where != where || s->kind != kind || strcmp(s->python, python) != 0) {
            continue;
        }
        s->count++;
        s->wait_ms += waited;
        return;
    }
}

static int mine(void) { return recording && pthread_equal(pthread_self(), recorder); }

PyGILState_STATE PyGILState_Ensure(void) {
    if (!real_ensure)
        real_ensure = (ensure_fn)dlsym(RTLD_NEXT, "PyGILState_Ensure");
    if (!mine())
        return real_ensure();
    void *where, *above[2];
    locate(&where, above);
    double t = now_ms();
    PyGILState_STATE state = real_ensure();
    count(0, where, above, "", now_ms() - t);
    return state;
}

void PyEval_RestoreThread(PyThreadState *tstate) {
    if (!real_restore)
        real_restore = (restore_fn)dlsym(RTLD_NEXT, "PyEval_RestoreThread");
    if (!mine()) {
        real_restore(tstate);
        return;
    }
    void *where, *above[2];
    locate(&where, above);
    double t = now_ms();
    real_restore(tstate);
    double waited = now_ms() - t;
    char line[160];
    python_line(line, sizeof line);
    count(1, where, above, line, waited);
}

/* The API bench/gil_sites.py calls through ctypes. */
void gil_shim_record(int on) {
    recorder = pthread_self();
    recording = on;
}

void gil_shim_reset(void) { memset(sites, 0, sizeof sites); }

static const char *name(void *address) {
    Dl_info info;
    return address && dladdr(address, &info) && info.dli_sname ? info.dli_sname : "?";
}

/* One line per site: kind, count, wait ms, Python line, library, frame, the two named frames above. */
int gil_shim_dump(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    for (int i = 0; i < SLOTS; i++) {
        struct site *s = &sites[i];
        if (!s->count)
            continue;
        Dl_info info;
        const char *lib = s->where && dladdr(s->where, &info) && info.dli_fname ? info.dli_fname : "?";
        fprintf(f, "%s\t%ld\t%.3f\t%s\t%s\t%s\t%s\t%s\n", s->kind ? "return" : "entry", s->count,
                s->wait_ms, s->python[0] ? s->python : "-", lib, name(s->where), name(s->above[0]),
                name(s->above[1]));
    }
    return fclose(f);
}
