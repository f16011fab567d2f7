/* tensord_kernel.h — the kernel ABI of tensord artifacts: the one header a
 * kernel author includes. Plain C (C99 and C++ alike), DLPack tensor views,
 * an int status plus a message; no C++ type, abseil or protobuf crosses it.
 *
 * An artifact's shared object exports one query function, tensord_library(),
 * that describes its ops, and one function per op and device:
 *
 *   #include <tensord_kernel.h>
 *
 *   static int32_t scale(TdKernelEnv* env) {          // mylib::scale(Tensor x, float s) -> Tensor
 *     const DLTensor* x = env->args[0].value.tensor;  // schema order
 *     double s = env->args[1].value.f;
 *     DLTensor* y = &env->outputs[0];                 // allocated by the daemon from the shape rule
 *     if (x->dtype.code != kDLFloat || x->dtype.bits != 32) return td_fail(env, "scale: expected float32");
 *     ...
 *     return TD_OK;
 *   }
 *   TD_EXPORT int32_t mylib_scale_cpu(TdKernelEnv* env) { return scale(env); }
 *
 *   static const TdOpDecl kOps[] = {
 *     {"mylib::scale(Tensor x, float s) -> Tensor",
 *      "return empty(x.shape, dtype=x.dtype, layout=like(x))",   // shape rule (docs/custom-ops.md)
 *      "x: grad * s",                                            // derivative (docs/custom-ops.md), or NULL
 *      "mylib_scale_cpu", NULL},                                 // symbols per device (CPU, CUDA)
 *  };
 *   TD_DEFINE_LIBRARY("mylib", kOps)
 *
 * Versioning. TD_KERNEL_ABI_VERSION counts the versions of this header. A
 * later version only adds: fields at the end of a struct (each struct that
 * can grow carries its size, so an older reader ignores what it does not
 * know and a newer one sees what an older writer left out), argument kinds,
 * and functions. An existing field, constant or signature never changes
 * meaning. An artifact records the version it was built against; a daemon
 * runs artifacts built for its version or an older one and refuses newer
 * ones, naming both.
 *
 * The calling contract:
 *  - The daemon calls a kernel with every output allocated (shape, strides
 *    and dtype from the op's shape rule; contiguous or as the rule's layout
 *    says) and expects every element of every output written before the
 *    kernel returns TD_OK (CPU), or enqueued on env->stream (CUDA).
 *  - Inputs are read-only views; they may be strided (any DLTensor.strides,
 *    in elements, never NULL) and may overlap one another. Outputs never
 *    overlap inputs. Inputs arrive as the caller gave them: nothing is
 *    broadcast to the output's shape (a [n] bias stays 1-D). `data` points
 *    at the first element; byte_offset is 0. Outputs are not zeroed.
 *  - Dtypes: bool has code 6 (DLPack 0.8's kDLBool), bfloat16 kDLBfloat;
 *    float8 tensors cannot cross the ABI. Check every dtype you read: a
 *    kernel that writes float32 into a float16 output writes past its end.
 *  - A kernel returns TD_OK (0) or a failure: any other value, with a
 *    message set by td_fail or env->set_error (UTF-8; cut at 4 KiB). The failure surfaces at the
 *    caller's next sync point as a RuntimeError naming the op and the call
 *    site; the outputs are discarded. A C++ exception must not cross this
 *    boundary: the TD_EXPORT wrappers an author writes catch what their body
 *    may throw (TD_KERNEL_TRY / TD_KERNEL_CATCH below do it).
 *  - Scratch memory: env->scratch(env, bytes) gives 64-byte aligned memory
 *    on the kernel's device, charged to the calling session's memory limit
 *    and freed after the kernel returns (CUDA: after the work enqueued on
 *    env->stream has run); NULL when over the limit (then return a failure).
 *  - A kernel may be called from any daemon thread, and concurrently for
 *    different sessions: keep no unsynchronised global state.
 */
#ifndef TENSORD_KERNEL_H_
#define TENSORD_KERNEL_H_

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header. */
#define TD_KERNEL_ABI_VERSION 1

/* Status codes. Any non-zero status is a failure; TD_ERROR is the usual one. */
#define TD_OK 0
#define TD_ERROR 1

/* What TdArg.value holds: one kind per schema argument type. */
typedef enum {
  TD_ARG_NONE = 0,     /* an optional argument that is absent (None) */
  TD_ARG_TENSOR = 1,   /* Tensor: value.tensor */
  TD_ARG_INT = 2,      /* int, SymInt: value.i */
  TD_ARG_FLOAT = 3,    /* float: value.f */
  TD_ARG_BOOL = 4,     /* bool: value.b (0 or 1) */
  TD_ARG_INTS = 5,     /* int[]: value.ints */
  TD_ARG_STRING = 6,   /* str: value.str (UTF-8, NUL-terminated) */
  TD_ARG_DTYPE = 7,    /* ScalarType: value.dtype */
  TD_ARG_SCALAR = 8,   /* Scalar: value.scalar */
  TD_ARG_TENSORS = 9,  /* Tensor[], Tensor?[]: value.tensors (NULL for an absent element) */
  TD_ARG_FLOATS = 10   /* float[]: value.floats */
} TdArgKind;

typedef struct {
  const int64_t* data;
  int64_t size;
} TdIntList;

typedef struct {
  const double* data;
  int64_t size;
} TdFloatList;

typedef struct {
  const DLTensor* const* data;
  int64_t size;
} TdTensorList;

/* A Scalar argument: a Python number, kept as the kind it was. */
typedef struct {
  int32_t kind; /* TD_ARG_INT, TD_ARG_FLOAT or TD_ARG_BOOL */
  int32_t reserved;
  union {
    int64_t i;
    double f;
    int32_t b;
  } value;
} TdScalar;

/* One non-output argument of the op, in schema order. */
typedef struct {
  int32_t kind; /* TdArgKind */
  int32_t reserved;
  union {
    const DLTensor* tensor;
    int64_t i;
    double f;
    int32_t b;
    TdIntList ints;
    TdFloatList floats;
    TdTensorList tensors;
    const char* str;
    DLDataType dtype;
    TdScalar scalar;
  } value;
} TdArg;

typedef struct TdKernelEnv TdKernelEnv;

/* What the daemon passes to every kernel call. Grows only at the end;
 * `size` is sizeof(TdKernelEnv) in the daemon's copy of this header. */
struct TdKernelEnv {
  uint32_t abi_version; /* the daemon's TD_KERNEL_ABI_VERSION */
  uint32_t size;        /* bytes of this struct the daemon filled in */
  /* The op's full name ("mylib::scale"), for messages. */
  const char* op_name;
  /* The arguments in schema order (num_args of them). */
  int32_t num_args;
  int32_t num_outputs;
  const TdArg* args;
  /* The outputs, allocated and described by the daemon (num_outputs). */
  DLTensor* outputs;
  /* The session's stream on the kernel's device: a cudaStream_t for a CUDA
   * kernel, NULL for a CPU kernel. Enqueue all device work on it. */
  void* stream;
  /* Scratch memory on the kernel's device, 64-byte aligned, charged to the
   * session and freed after the call; NULL when over the limit. */
  void* (*scratch)(TdKernelEnv* env, int64_t bytes);
  /* Sets the failure message (copied; the first one set is kept). */
  void (*set_error)(TdKernelEnv* env, const char* message);
  /* The daemon's own state for this call: do not touch. */
  void* daemon_private;
};

/* A kernel: returns TD_OK, or a failure with a message set. */
typedef int32_t (*TdKernelFn)(TdKernelEnv* env);

/* One op of the library.
 *  schema:     "ns::name(Tensor x, ...) -> Tensor", in the op table's syntax;
 *              the namespace is the library's name.
 *  shape_rule: a declarative shape rule (docs/custom-ops.md), or
 *              "like:<built-in op>" to take a built-in op's meta function.
 *  derivative: the op's derivative written in table ops (a declared
 *              derivative, docs/custom-ops.md: "x: grad * s"), or NULL for
 *              an op autograd does not differentiate.
 *  cpu_symbol, cuda_symbol: the exported TdKernelFn of each device, NULL
 *              for a device the library does not implement. */
typedef struct {
  const char* schema;
  const char* shape_rule;
  const char* derivative;
  const char* cpu_symbol;
  const char* cuda_symbol;
} TdOpDecl;

/* What tensord_library() returns. Grows only at the end (`size`). */
typedef struct {
  uint32_t abi_version; /* TD_KERNEL_ABI_VERSION the library was built with */
  uint32_t size;        /* sizeof(TdLibrary) as the library was built */
  const char* name;     /* the namespace of every op ("mylib") */
  int64_t num_ops;
  const TdOpDecl* ops;
} TdLibrary;

/* The query function every artifact exports. */
typedef const TdLibrary* (*TdLibraryQueryFn)(void);
#define TD_LIBRARY_QUERY_SYMBOL "tensord_library"

#if defined(__GNUC__)
#define TD_EXPORT_ATTR __attribute__((visibility("default")))
#else
#define TD_EXPORT_ATTR
#endif

#ifdef __cplusplus
#define TD_EXPORT extern "C" TD_EXPORT_ATTR
#else
#define TD_EXPORT TD_EXPORT_ATTR
#endif

/* Defines tensord_library() over a static array of TdOpDecl. */
#define TD_DEFINE_LIBRARY(lib_name, op_array)                                                     \
  TD_EXPORT const TdLibrary* tensord_library(void) {                                              \
    static const TdLibrary lib = {TD_KERNEL_ABI_VERSION, (uint32_t)sizeof(TdLibrary), lib_name, \
                                  (int64_t)(sizeof(op_array) / sizeof(op_array[0])), op_array};   \
    return &lib;                                                                                  \
  }

/* Sets `message` as the call's failure and returns TD_ERROR. */
static inline int32_t td_fail(TdKernelEnv* env, const char* message) {
  env->set_error(env, message);
  return TD_ERROR;
}

#ifdef __cplusplus
} /* extern "C" */

/* C++ only: catch what a kernel body throws at the boundary.
 *   TD_EXPORT int32_t mylib_f_cpu(TdKernelEnv* env) { TD_KERNEL_TRY return f(env); TD_KERNEL_CATCH(env) }
 */
#include <exception>
#define TD_KERNEL_TRY try {
#define TD_KERNEL_CATCH(env)                                  \
  }                                                           \
  catch (const std::exception& e) {                           \
    return td_fail(env, e.what());                            \
  }                                                           \
  catch (...) {                                               \
    return td_fail(env, "a kernel threw a non-std exception"); \
  }
#endif

#endif /* TENSORD_KERNEL_H_ */
