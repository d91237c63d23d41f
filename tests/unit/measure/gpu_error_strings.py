"""Failure text recorded from real GPU runs (issues, logs) or built from the cited source's
format string: what the classifier must call out of memory, and what it must not.

Each entry names its source; "recorded" = copied from the cited issue or run, "constructed" =
assembled from the format string in the cited source file.
"""

RECORDED_ERRORS: tuple[tuple[str, bool, str, str], ...] = (
    (("2021-06-26 17:01:46.891583: E external/org_tensorflow/tensorflow/stream_executor/cuda/"
     "cuda_blas.cc:226] failed to create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED\n"
     "2021-06-26 17:01:46.891610: F external/org_tensorflow/tensorflow/compiler/xla/service/gpu/"
     "gemm_algorithm_picker.cc:113] Check failed: stream->parent()->GetBlasGemmAlgorithms"
     "(&algorithms) \nAborted (core dumped)"),
     True, "strong", "recorded: jax-ml/jax#7118 (description, 2021-06-27)"),
    (("2022-12-03 10:29:49.497205: E external/org_tensorflow/tensorflow/compiler/xla/stream_executor/"
     "cuda/cuda_blas.cc:219] failed to create cublas handle: cublas error\n"
     "2022-12-03 10:29:49.497835: E external/org_tensorflow/tensorflow/compiler/xla/stream_executor/"
     "cuda/cuda_blas.cc:221] Failure to initialize cublas may be due to OOM (cublas needs some free "
     "memory when you initialize it, and your deep-learning framework may have preallocated more "
     "than its fair share), or may be because this binary was not built with support for the GPU "
     "in your machine.\n"
     "2022-12-03 10:29:49.498309: E external/org_tensorflow/tensorflow/compiler/xla/"
     "status_macros.cc:57] INTERNAL: RET_CHECK failure (external/org_tensorflow/tensorflow/compiler/"
     "xla/service/gpu/gemm_algorithm_picker.cc:327) stream->parent()->GetBlasGemmAlgorithms(stream, "
     "&algorithms)"),
     True, "strong", "recorded: jax-ml/jax#13504 (description, 2022-12-03)"),
    ("jax.errors.JaxRuntimeError: INTERNAL: Failed to initialize BLAS support",
     True, "strong", ("constructed: openxla/xla gemm_thunk.cc "
                     "GemmThunk::Initialize, absl::InternalError(\"Failed to initialize BLAS support\")")),
    (("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
     "allocate 6291456 bytes.\nBufferAssignment OOM Debugging."),
     True, "strong", "recorded: jax-ml/jax#13428"),
    ("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 4294967296 bytes.",
     True, "strong", ("recorded here: jaxlib 0.9.2 CPU backend under RLIMIT_DATA=1.5e9, "
                     "jnp.ones((4096,4096,64))")),
    (("2019-06-08 03:44:36.084180: E external/org_tensorflow/tensorflow/stream_executor/cuda/"
     "cuda_driver.cc:828] failed to allocate 3.39G (3640655872 bytes) from device: "
     "CUDA_ERROR_OUT_OF_MEMORY: out of memory"),
     True, "weak", "recorded: jax-ml/jax#788 (the process went on: a retry, not a failure)"),
    (("2019-06-08 03:44:36.087182: E external/org_tensorflow/tensorflow/compiler/xla/service/gpu/"
     "cudnn_conv_algorithm_picker.cc:555] Resource exhausted: Failed to allocate request for 3.39GiB "
     "(3640655872B) on device ordinal 0"),
     True, "weak", "recorded: jax-ml/jax#788 (autotuner scratch, logged, not fatal)"),
    (("2025-03-17 17:48:09.935747: W tensorflow/core/common_runtime/bfc_allocator.cc:275] Allocator "
     "(GPU_0_bfc) ran out of memory trying to allocate 2.10GiB with freed_by_count=0. The caller "
     "indicates that this is not a failure, but may mean that there could be performance gains if "
     "more memory were available.\nFatal Python error: Segmentation fault"),
     False, "none", "recorded: talmolab/sleap#2142 (BFC line) + a segfault line: noise only"),
    (("W0000 00:00:1773083052.386489   70889 bfc_allocator.cc:513] Allocator (GPU_0_bfc) ran out of "
     "memory trying to allocate 1.00GiB from the kLower end with freed_by_count=0. The caller "
     "indicates that this is not a failure, but this may mean that there could be performance "
     "gains if more memory were available."),
     False, "none", ("constructed: openxla/xla xla/tsl/framework/bfc_allocator.cc "
                    "BFCAllocator::AllocateRaw LOG(WARNING) format (allocation-end text a guess)")),
    (("2024-11-20 20:37:20.877478: W external/xla/xla/hlo/transforms/simplifiers/"
     "hlo_rematerialization.cc:3020] Can't reduce memory use below 2.12GiB (2278089352 bytes) by "
     "rematerialization; only reduced to 5.65GiB (6063398400 bytes), down from 5.70GiB "
     "(6125699228 bytes) originally"),
     False, "none", "recorded: google-deepmind/mujoco#2236 (RTX 2060 SUPER 8GB): a warning"),
    (("2024-08-21 21:58:26.434829: W external/xla/xla/service/hlo_rematerialization.cc:3005] Can't "
     "reduce memory use below -795.17MiB (-833792853 bytes) by rematerialization; only reduced to "
     "12.70GiB (13641024129 bytes), down from 12.76GiB (13698962697 bytes) originally"),
     False, "none", "recorded: google-deepmind/mujoco#1918: a warning"),
    (("E0000 00:00:1773083054.653585   70889 gpu_hlo_schedule.cc:868] The byte size of input/output "
     "arguments (86973087744) exceeds the base limit (81174881894). This indicates an error in the "
     "calculation!"),
     False, "none", "recorded: EnzymeAD/Reactant.jl#2632: scheduler limit message, not an OOM"),
    (("RuntimeError: Failed to update graph memcpy batch: Warp CUDA error 1: invalid argument (in "
     "function wp_cuda_graph_update_memcpy_batch, /builds/omniverse/warp/warp/native/warp.cu:3018)"),
     False, "none", "recorded: google-deepmind/mujoco#3191: a Warp error that is not memory"),
)

# Lines that say the cap never applied: (text, expected reason, source).
RECORDED_CAP_FAILURES: tuple[tuple[str, str, str], ...] = (
    (("ValueError: XLA_CLIENT_MEM_FRACTION is specified together with "
     "XLA_PYTHON_CLIENT_MEM_FRACTION. Remove the latter one, it is deprecated."),
     "both_fraction_variables",
     "recorded here: jaxlib 0.9.2 xla_client.generate_pjrt_gpu_plugin_options() with both set"),
    (("An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed. "
     "Falling back to cpu."), "no_cuda_jaxlib",
     "constructed: jax 0.9.2 jax/_src/xla_bridge.py _suggest_missing_backends"),
    (("ERROR:jax._src.xla_bridge:Jax plugin configuration error: Exception when calling "
     "jax_plugins.xla_cuda12.initialize()"), "plugin_initialize_failed",
     ("constructed: jax 0.9.2 jax/_src/xla_bridge.py _discover_and_register_pjrt_plugins "
     "logger.exception (logger prefix a guess)")),
    (("RuntimeError: Unable to initialize backend 'rocm': module 'jaxlib.xla_extension' has no "
     "attribute 'GpuAllocatorConfig' (set JAX_PLATFORMS='' to automatically choose an available "
     "backend)"), "backend_unavailable", "recorded: jax-ml/jax#25315 (JAX_PLATFORMS=gpu)"),
    (("ValueError: XLA_PYTHON_CLIENT_ALLOCATOR env var must be \"default\", \"platform\", "
     "\"bfc\", or \"cuda_async\", got \"bogus\""), "bad_allocator_variable",
     "recorded here: jaxlib 0.9.2 generate_pjrt_gpu_plugin_options()"),
)
