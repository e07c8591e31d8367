# Sourced at the start of a run on the GPU machine: the Vulkan loader
# (copied as Debian's libvulkan1 in .gl/) and the Dawn library path.
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
# Both npm Dawns (the default build's shim finds dawn.node beside itself).
export LD_LIBRARY_PATH="$PWD/.deps/dawn-node:$PWD/.deps/dawn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Libraries the GPU machine lacks (libonnx_proto, libprotobuf), copied from
# this machine into .payload/lib by bench/make_payload.sh.
if [ -d .payload/lib ]; then export LD_LIBRARY_PATH="$PWD/.payload/lib:$LD_LIBRARY_PATH"; fi
export WGNN_DEPS_DIR="$PWD/.deps"
