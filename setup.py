"""Build flashclifford._C.

C sources go through the host compiler (with OpenMP where it has it); the .cu sources go
through nvcc when one is found, and the CUDA runtime is linked statically so the module
imports on machines without a GPU driver. Without nvcc (or with FLASHCLIFFORD_NO_CUDA=1) the
build is CPU-only, and says so in one line.

Environment:
  FLASHCLIFFORD_CUDA_ARCHS  "8.0;9.0+PTX" (default; TORCH_CUDA_ARCH_LIST syntax, "9.0a" for
                            sm_90a, "native" for the GPUs of this machine). TORCH_CUDA_ARCH_LIST
                            is used when this is unset.
                            Sources named *_sm90a.cu (Hopper-only wgmma / TMA kernels) are built
                            for sm_90a alone when 9.0 or 9.0a is in the list, and as a stub
                            that never launches otherwise ("native" included).
  FLASHCLIFFORD_NO_CUDA=1   CPU-only build.
  FLASHCLIFFORD_DEBUG=1     -O0 -g, and a device synchronise after each kernel launch.
  FLASHCLIFFORD_SANITIZE    e.g. "address,undefined": host sanitizers for the C code.
  FLASHCLIFFORD_NVCC_CACHE  a directory of compiled .cu objects keyed by a hash of the source, the
                            headers it includes, the flags and nvcc's --version: a rebuild recompiles
                            only what changed (benchmarks/nvcc_cache_fill.sh fills one here for a
                            Hopper machine, whose GPU check script unpacks it when carried).
  CUDA_HOME / CUDA_PATH     the toolkit (else the one nvcc on PATH belongs to).
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
VERSION = "0.1.0"
DEBUG = os.environ.get("FLASHCLIFFORD_DEBUG") == "1"
SANITIZE = os.environ.get("FLASHCLIFFORD_SANITIZE", "")


def find_cuda():
    """(nvcc, include dir, library dir) of the CUDA toolkit, or None."""
    if os.environ.get("FLASHCLIFFORD_NO_CUDA") == "1":
        return None
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    nvcc = Path(home, "bin", "nvcc") if home else None
    if nvcc is None or not nvcc.exists():
        found = shutil.which("nvcc")
        if not found:
            return None
        nvcc = Path(found)
        home = None
    candidates = [Path(home)] if home else [nvcc.resolve().parent.parent, Path("/usr/local/cuda")]
    for base in candidates:
        for inc in (base / "include", base / "targets" / "x86_64-linux" / "include"):
            if not (inc / "cuda_runtime.h").exists():
                continue
            for lib in (base / "lib64", base / "lib", base / "targets" / "x86_64-linux" / "lib"):
                if (lib / "libcudart_static.a").exists():
                    return str(nvcc), str(inc), str(lib)
    return None


def has_sm90(spec):
    """Whether the arch list names compute capability 9.0 (with or without "a" / "+PTX")."""
    items = spec.replace(",", ";").replace(" ", ";").split(";")
    return any(i.strip().removesuffix("+PTX").removesuffix("a") in ("9.0", "90") for i in items)


def gencode_flags(spec):
    """nvcc -gencode flags from a TORCH_CUDA_ARCH_LIST-style list ("8.0;9.0+PTX", "9.0a")."""
    if spec.strip() == "native":
        return ["-arch=native"], "native"
    flags, names = [], []
    for item in spec.replace(",", ";").replace(" ", ";").split(";"):
        item = item.strip()
        if not item:
            continue
        ptx = item.endswith("+PTX")
        num = item[: -len("+PTX")] if ptx else item
        cc = num.replace(".", "")
        flags.append(f"-gencode=arch=compute_{cc},code=sm_{cc}")
        names.append(f"sm_{cc}")
        if ptx:
            flags.append(f"-gencode=arch=compute_{cc},code=compute_{cc}")
            names.append(f"compute_{cc}")
    if not flags:
        raise SystemExit(f"flashclifford: no CUDA architecture in {spec!r}")
    return flags, " ".join(names)


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def source_key(src, cmd, salt):
    """Hash of the command line, the compiler (salt: its --version), the source and every
    project header it reaches by #include "..." (next to the including file, then in csrc/)."""
    h = hashlib.sha256((" ".join(cmd[:-4]) + salt).encode())  # flags, not the file names
    seen, todo = set(), [(ROOT / src).resolve()]
    while todo:
        path = todo.pop()
        if path in seen or not path.exists():
            continue
        seen.add(path)
        text = path.read_bytes()
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + text)
        for name in INCLUDE.findall(text.decode(errors="replace")):
            todo += [(path.parent / name).resolve(), (ROOT / "csrc" / name).resolve()]
    return h.hexdigest()[:20]


class BuildExt(build_ext):
    """Compiles the .cu sources with nvcc (in parallel) and links their objects in."""

    def build_extension(self, ext):
        cu = [s for s in ext.sources if s.endswith(".cu")]
        ext.sources = [s for s in ext.sources if not s.endswith(".cu")]
        if cu:
            ext.extra_objects = list(ext.extra_objects or []) + self.compile_cuda(ext, cu)
        super().build_extension(ext)

    def compile_cuda(self, ext, sources):
        nvcc = ext.cuda_nvcc
        out_dir = Path(self.build_temp) / "cuda"
        out_dir.mkdir(parents=True, exist_ok=True)
        flags = [
            "-std=c++17",
            "-Xcompiler", "-fPIC",
            "-lineinfo",
            "-Icsrc",
            f"-DFC_CUDA_ARCHS=\"{ext.cuda_arch_names}\"",
            "-Xcudafe", "--diag_suppress=esa_on_defaulted_function_ignored",
        ] + ext.cuda_gencode
        flags += ["-O0", "-g", "-DFLASHCLIFFORD_CUDA_SYNC"] if DEBUG else ["-O3"]

        cache = os.environ.get("FLASHCLIFFORD_NVCC_CACHE")
        salt = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout if cache else ""

        # Hopper-only units: their kernels use sm_90a instructions, so their code is for sm_90a
        # alone (it runs on compute capability 9.0 exactly); without a 9.0 target they build
        # as stubs whose launchers report the path unavailable (FC_SM90A=0)
        common = [f for f in flags if not f.startswith(("-gencode", "-arch"))]
        sm90a = common + (["-gencode=arch=compute_90a,code=sm_90a", "-DFC_SM90A=1"] if ext.cuda_sm90
                          else ext.cuda_gencode + ["-DFC_SM90A=0"])

        def one(src):
            obj = out_dir / (Path(src).stem + ".o")
            cmd = [nvcc, *(sm90a if src.endswith("_sm90a.cu") else flags), "-c", src, "-o", str(obj)]
            cached = Path(cache, f"{Path(src).stem}-{source_key(src, cmd, salt)}.o") if cache else None
            if cached is not None and cached.exists():
                print(f"flashclifford: {src} unchanged, object from {cached}", flush=True)
                shutil.copyfile(cached, obj)
                os.utime(cached)  # used now: benchmarks/nvcc_cache_fill.sh keeps only what a build used
                return str(obj)
            print(" ".join(cmd), flush=True)
            subprocess.run(cmd, check=True, cwd=ROOT)
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(obj, cached)
            return str(obj)

        jobs = int(os.environ.get("FLASHCLIFFORD_NVCC_JOBS", os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(one, sources))


def make_extension():
    c_sources = [
        "csrc/module.c",
        "csrc/bind_ops.c",
        "csrc/array.c",
        "csrc/buffer.c",
        "csrc/algebra.c",
        "csrc/status.c",
    ] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "csrc" / "cpu").glob("*.c"))
    cflags = ["-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers", "-fopenmp"]
    cflags += ["-O0", "-g"] if DEBUG else ["-O3"]
    ldflags = ["-fopenmp"]
    if SANITIZE:
        cflags += [f"-fsanitize={SANITIZE}", "-fno-omit-frame-pointer"]
        ldflags += [f"-fsanitize={SANITIZE}"]
    ext = Extension(
        "flashclifford._C",
        sources=c_sources,
        include_dirs=["csrc", numpy.get_include()],
        define_macros=[("FC_VERSION", f'"{VERSION}"')],
        extra_compile_args=cflags,
        extra_link_args=ldflags,
    )
    cuda = find_cuda()
    if cuda is None:
        print("flashclifford: nvcc not found (or FLASHCLIFFORD_NO_CUDA=1): building the CPU-only extension",
              file=sys.stderr, flush=True)
        ext.sources.append("csrc/nocuda.c")
        return ext
    nvcc, inc, lib = cuda
    spec = (os.environ.get("FLASHCLIFFORD_CUDA_ARCHS") or os.environ.get("TORCH_CUDA_ARCH_LIST")
            or "8.0;9.0+PTX")
    ext.cuda_nvcc = nvcc
    ext.cuda_gencode, ext.cuda_arch_names = gencode_flags(spec)
    ext.cuda_sm90 = has_sm90(spec)
    print(f"flashclifford: building with CUDA ({nvcc}) for {ext.cuda_arch_names}", file=sys.stderr,
          flush=True)
    ext.sources += sorted(str(p.relative_to(ROOT)) for p in (ROOT / "csrc" / "cuda").glob("*.cu"))
    ext.include_dirs.append(inc)
    ext.library_dirs.append(lib)
    # static cudart: the module needs only the driver, loaded by the runtime when first used
    ext.libraries += ["cudart_static", "rt", "pthread", "dl"]
    ext.extra_link_args.append("-lstdc++")
    return ext


setup(
    version=VERSION,
    ext_modules=[make_extension()],
    cmdclass={"build_ext": BuildExt},
)
