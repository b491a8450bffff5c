/* The runtime the ahead-of-time kernel library links in place of numba's: its parallel-loop launcher and
 * scheduler (over a pool of POSIX threads, no OpenMP), the memory-info allocator behind np.empty in compiled code,
 * and inert stand-ins for the few Python C-API calls numba's generated code makes around a parallel region
 * (the library is called with the GIL released and never raises into Python: a failure is its status code).
 * Symbols the kernels' code calls keep numba's names and calling conventions; Python API names are renamed with
 * the RENAMED prefix by the build (lite/kernels/compiled/aot/build.py). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SPIN_TURNS 20000           /* a worker's busy turns after a region before it sleeps (~0.1-0.3 ms) */
#define MAX_THREADS 256
#define MAX_DIMS 32               /* of an array numba reshapes */
#define INLINE 64                 /* arguments and core dimensions of a parallel loop held on the stack */

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

typedef void (*gufunc_t)(char **args, intptr_t *dims, intptr_t *steps, void *data);

/* ---- thread counts --------------------------------------------------------------------------------------- */
static int max_threads;                    /* workers + the launching thread */
static __thread intptr_t thread_count;     /* the launching thread's count; 0: max_threads */
static __thread uintptr_t chunk_size;

static int pool_size(void) {
    if (!max_threads) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        const char *env = getenv("MSLITE_NUM_THREADS");
        long n = env && atol(env) > 0 ? atol(env) : cores;
        max_threads = n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
    }
    return max_threads;
}

int mslite_max_threads(void) { return pool_size(); }
intptr_t get_num_threads(void) { return thread_count > 0 ? thread_count : pool_size(); }
void mslite_set_num_threads(intptr_t n) { thread_count = n < 1 ? 1 : n > pool_size() ? pool_size() : n; }
intptr_t mslite_get_num_threads(void) { return get_num_threads(); }
uintptr_t get_parallel_chunksize(void) { return chunk_size; }
void set_parallel_chunksize(uintptr_t n) { chunk_size = n; }

/* ---- the schedule: the outermost dimension in contiguous parts, one per thread ---------------------------- */
uintptr_t get_sched_size(uintptr_t threads, uintptr_t dims, intptr_t *starts, intptr_t *stops) {
    intptr_t extent = dims ? stops[0] - starts[0] + 1 : 1;
    (void)dims;
    return extent < 1 ? 1 : (uintptr_t)extent < threads ? (uintptr_t)extent : threads;
}

void *allocate_sched(uintptr_t entries) { return malloc(entries * sizeof(intptr_t) + 1); }
void deallocate_sched(void *sched) { free(sched); }

static intptr_t *schedule(uintptr_t dims, intptr_t *starts, intptr_t *stops, uintptr_t parts, intptr_t *sched) {
    intptr_t extent = stops[0] - starts[0] + 1, begin = starts[0];
    for (uintptr_t p = 0; p < parts; p++) {
        intptr_t *row = sched + p * 2 * dims;
        intptr_t size = extent < 1 ? 0 : extent / (intptr_t)parts + ((intptr_t)p < extent % (intptr_t)parts);
        memcpy(row, starts, dims * sizeof(intptr_t));
        memcpy(row + dims, stops, dims * sizeof(intptr_t));
        row[0] = begin;
        row[dims] = extent < 1 ? stops[0] : begin + size - 1;     /* inclusive */
        begin += size;
    }
    return sched;
}

intptr_t *do_scheduling_signed(uintptr_t dims, intptr_t *starts, intptr_t *stops, uintptr_t parts, intptr_t *sched,
                               intptr_t debug) {
    (void)debug;
    return schedule(dims, starts, stops, parts, sched);
}

intptr_t *do_scheduling_unsigned(uintptr_t dims, intptr_t *starts, intptr_t *stops, uintptr_t parts,
                                 intptr_t *sched, intptr_t debug) {
    (void)debug;
    return schedule(dims, starts, stops, parts, sched);
}

/* ---- the pool ---------------------------------------------------------------------------------------------- */
typedef struct {
    gufunc_t fn;
    char **args;
    intptr_t *dims, *steps, inner_ndim, array_count, rows;
    void *data;
    atomic_intptr_t next_row;
    atomic_int pending;
} job_t;

/* Each worker watches its own slot: a launch hands its job to as many workers as it has threads to spare. Rows
 * go to whoever asks first, the launcher included; once none is left, the launcher takes back the hand-offs no
 * worker has picked up yet (a worker descheduled on a busy machine then costs nothing) and waits only for the
 * workers running rows, so no worker ever sees a finished launch's job. */
typedef struct {
    _Atomic(job_t *) job;
    atomic_ulong handed;
    char padding[64];
} slot_t;

static pthread_mutex_t launching = PTHREAD_MUTEX_INITIALIZER;    /* one region at a time; others run serially */
static pthread_mutex_t sleeping = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static slot_t slots[MAX_THREADS];
static int workers;

/* Rows of the gufunc numba made of a parallel loop: `dims` is the row count, then the core dimensions of every
 * array argument (`inner_ndim` of them); each row runs with a row count of 1 and its arguments advanced. */
static void run_rows(job_t *job) {
    intptr_t inline_counts[INLINE], *counts = job->inner_ndim < INLINE ? inline_counts
                                                                      : malloc((job->inner_ndim + 1) * sizeof(intptr_t));
    char *inline_args[INLINE];
    char **args = job->array_count <= INLINE ? inline_args : malloc(job->array_count * sizeof(char *));
    memcpy(counts, job->dims, (job->inner_ndim + 1) * sizeof(intptr_t));
    counts[0] = 1;
    for (intptr_t r; (r = atomic_fetch_add(&job->next_row, 1)) < job->rows;) {
        for (intptr_t j = 0; j < job->array_count; j++)
            args[j] = job->args[j] + job->steps[j] * r;
        job->fn(args, counts, job->steps, job->data);
    }
    if (args != inline_args)
        free(args);
    if (counts != inline_counts)
        free(counts);
}

static void *worker(void *arg) {
    slot_t *slot = arg;
    unsigned long seen = 0;
    for (;;) {
        for (int turn = 0; turn < SPIN_TURNS && atomic_load(&slot->handed) == seen; turn++)
            cpu_relax();
        if (atomic_load(&slot->handed) == seen) {
            pthread_mutex_lock(&sleeping);
            while (atomic_load(&slot->handed) == seen)
                pthread_cond_wait(&wake, &sleeping);
            pthread_mutex_unlock(&sleeping);
        }
        seen = atomic_load(&slot->handed);
        job_t *job = atomic_exchange(&slot->job, NULL);     /* NULL: the launcher took it back */
        if (job) {
            run_rows(job);
            atomic_fetch_sub(&job->pending, 1);
        }
    }
    return NULL;
}

static int start_workers(void) {
    if (workers)
        return workers;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int i = 0; i < pool_size() - 1; i++) {
        pthread_t thread;
        if (pthread_create(&thread, &attr, worker, &slots[i]) != 0)
            break;
        workers++;
    }
    pthread_attr_destroy(&attr);
    return workers;
}

void numba_parallel_for(void *fn, char **args, intptr_t *dims, intptr_t *steps, void *data, intptr_t inner_ndim,
                        intptr_t array_count, intptr_t threads) {
    job_t job = {.fn = (gufunc_t)fn, .args = args, .dims = dims, .steps = steps, .inner_ndim = inner_ndim,
                 .array_count = array_count, .rows = dims[0], .data = data};
    atomic_init(&job.next_row, 0);
    atomic_init(&job.pending, 0);
    intptr_t helpers = (threads < job.rows ? threads : job.rows) - 1;
    if (helpers <= 0 || pthread_mutex_trylock(&launching) != 0) {
        run_rows(&job);
        return;
    }
    int available = start_workers();
    helpers = helpers < available ? helpers : available;
    atomic_store(&job.pending, (int)helpers);
    for (intptr_t i = 0; i < helpers; i++) {
        atomic_store(&slots[i].job, &job);
        atomic_fetch_add(&slots[i].handed, 1);
    }
    pthread_mutex_lock(&sleeping);
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&sleeping);
    run_rows(&job);
    for (intptr_t i = 0; i < helpers; i++) {   /* a worker not awake yet has nothing left to do: take it back */
        job_t *handed = &job;
        if (atomic_compare_exchange_strong(&slots[i].job, &handed, NULL))
            atomic_fetch_sub(&job.pending, 1);
    }
    for (int turn = 0; atomic_load(&job.pending) > 0; turn++) {
        if (turn < SPIN_TURNS)
            cpu_relax();
        else
            sched_yield();
    }
    pthread_mutex_unlock(&launching);
}

/* ---- numba's memory info (np.empty inside compiled code) --------------------------------------------------- */
typedef struct {
    size_t refct;
    void (*dtor)(void *, size_t, void *);
    void *dtor_info;
    void *data;
    size_t size;
    void *external_allocator;
} meminfo_t;

void *NRT_MemInfo_alloc_aligned(size_t size, unsigned align) {
    size_t head = sizeof(meminfo_t) + (align ? align : 1);
    meminfo_t *info = malloc(head + size);
    if (!info)
        return NULL;
    uintptr_t data = (uintptr_t)(info + 1);
    if (align)
        data = (data + align - 1) / align * align;
    *info = (meminfo_t){1, NULL, NULL, (void *)data, size, NULL};
    return info;
}

void *NRT_MemInfo_alloc_safe_aligned(size_t size, unsigned align) { return NRT_MemInfo_alloc_aligned(size, align); }
void *NRT_MemInfo_alloc(size_t size) { return NRT_MemInfo_alloc_aligned(size, 0); }
void *NRT_MemInfo_alloc_safe(size_t size) { return NRT_MemInfo_alloc_aligned(size, 0); }
void NRT_MemInfo_call_dtor(void *info) { free(info); }
void *NRT_Allocate(size_t size) { return malloc(size); }
void NRT_Free(void *pointer) { free(pointer); }

/* ---- reshaping a strided array without a copy (numpy's rule: each run of old axes that multiplies to a run of
 * new axes must be one contiguous block; the new axes take strides within it) ------------------------------ */
int numba_attempt_nocopy_reshape(intptr_t nd, const intptr_t *dims, const intptr_t *strides, intptr_t newnd,
                                 const intptr_t *newdims, intptr_t *newstrides, intptr_t itemsize, int is_f_order) {
    intptr_t od[MAX_DIMS], os[MAX_DIMS], ond = 0;
    (void)itemsize;
    if (nd > MAX_DIMS || newnd > MAX_DIMS)
        return 0;
    for (intptr_t i = 0; i < nd; i++)          /* axes of length 1 take no part */
        if (dims[i] != 1) {
            od[ond] = dims[i];
            os[ond++] = strides[i];
        }
    intptr_t oi = 0, ni = 0;
    while (oi < ond && ni < newnd) {
        intptr_t oj = oi + 1, nj = ni + 1, op = od[oi], np_ = newdims[ni];
        while (op != np_) {                    /* the smallest runs with equal products */
            if (np_ < op)
                np_ *= newdims[nj++];
            else
                op *= od[oj++];
        }
        for (intptr_t k = oi; k < oj - 1; k++) /* the old run must be contiguous in the order asked */
            if (is_f_order ? os[k + 1] != od[k] * os[k] : os[k] != od[k + 1] * os[k + 1])
                return 0;
        if (is_f_order) {
            newstrides[ni] = os[oi];
            for (intptr_t k = ni + 1; k < nj; k++)
                newstrides[k] = newstrides[k - 1] * newdims[k - 1];
        } else {
            newstrides[nj - 1] = os[oj - 1];
            for (intptr_t k = nj - 1; k > ni; k--)
                newstrides[k - 1] = newstrides[k] * newdims[k];
        }
        oi = oj;
        ni = nj;
    }
    intptr_t last = ni > 0 ? (is_f_order ? newstrides[ni - 1] * newdims[ni - 1] : newstrides[ni - 1]) : itemsize;
    for (; ni < newnd; ni++)                   /* trailing axes of length 1 */
        newstrides[ni] = last;
    return 1;
}
