# Sourced by the scripts: the environment wick's GPU code expects natively.
# Vulkan only, so wgpu does not also probe GL; a private runtime dir quiets
# the Vulkan loader's warnings.
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}"
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "$XDG_RUNTIME_DIR" ]; then
  export XDG_RUNTIME_DIR="${TMPDIR:-/tmp}/wick-runtime-$(id -u)"
  mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
fi
