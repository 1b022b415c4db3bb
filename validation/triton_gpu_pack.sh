#!/usr/bin/env bash
# Packs what validation/triton_gpu_campaign.py needs on a lent GPU machine, which reaches no
# registry, into .gpu-carry/ (ignored by git; name it in the device tool's carry):
#   tdist.tar.xz  Triton 2.51 from `make triton`'s .venv/triton-dist, cut to fit beside the
#                 repository in the device tool's 64 MiB: the server, the Python backend, the
#                 Python 3.12 stub (the device's Python), perf_analyzer, their libraries
#                 without the wheel's libpython; ICU's 29 MB data library is replaced by a
#                 stand-in that holds only its symbol (libxml2 links ICU, Triton never
#                 converts text with it). 24 MB.
#   py/           protobuf and tritonclient's model_config_pb2 alone (qmodel.triton writes
#                 config.pbtxt with them; the device has neither), pure Python. 1 MB.
# Then, on the device (about 4 minutes for the nine runs; tracked files must leave room:
# move large result files out of the tree for the call if the tool says it is too large):
#   tar xJf .gpu-carry/tdist.tar.xz -C /tmp
#   PYTHONPATH=$PWD/.gpu-carry/py:$PWD PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python \
#   QMODEL_TRITON_DIST=/tmp/tdist python3 validation/triton_gpu_campaign.py /tmp/gpuruns
set -eu
dist=${1:-.venv/triton-dist}
site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
stage=$(mktemp -d)/tdist
mkdir -p "$stage/bin" "$stage/lib" "$stage/nvidia_pytriton.libs" \
    "$stage/pytriton/tritonserver/python_backend_stubs"
cp -a "$dist/bin/perf_analyzer" "$stage/bin/"
cp -a "$dist/pytriton/tritonserver/bin" "$dist/pytriton/tritonserver/backends" \
    "$stage/pytriton/tritonserver/"
cp -a "$dist/pytriton/tritonserver/python_backend_stubs/3.12" \
    "$stage/pytriton/tritonserver/python_backend_stubs/"
for f in "$dist"/nvidia_pytriton.libs/*; do
    case $f in *libpython3*) ;; *) cp -a "$f" "$stage/nvidia_pytriton.libs/" ;; esac
done
icu=$(basename "$stage"/nvidia_pytriton.libs/libicudata-*.so.*)
echo 'const char icudt70_dat[32] __attribute__((aligned(16))) = {0};' > "$stage/icu.c"
gcc -shared -fPIC -O2 -Wl,-soname,"$icu" -o "$stage/nvidia_pytriton.libs/$icu" "$stage/icu.c"
rm "$stage/icu.c"
(cd "$stage/lib" && ln -s ../nvidia_pytriton.libs/libb64-*.so.0d libb64.so.0d &&
    ln -s ../nvidia_pytriton.libs/libcudart-*.so.12.* libcudart.so.12)
mkdir -p .gpu-carry
tar cJf .gpu-carry/tdist.tar.xz -C "$(dirname "$stage")" tdist
rm -rf .gpu-carry/py && mkdir -p .gpu-carry/py/tritonclient/grpc .gpu-carry/py/google
touch .gpu-carry/py/tritonclient/__init__.py .gpu-carry/py/tritonclient/grpc/__init__.py \
    .gpu-carry/py/google/__init__.py        # regular: wins over the device's google
cp "$site/tritonclient/grpc/model_config_pb2.py" .gpu-carry/py/tritonclient/grpc/
cp -r "$site/google/protobuf" .gpu-carry/py/google/
find .gpu-carry/py \( -name __pycache__ -o -name "*.so" -o -name "*.pyi" \) -prune \
    -exec rm -rf {} +
rm -rf .gpu-carry/py/google/protobuf/testdata .gpu-carry/py/google/protobuf/compiler
du -sh .gpu-carry/*
