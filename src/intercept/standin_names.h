/* Internal: the exported functions of each NVRTC 13 library the stand-in
 * route knows (docs/INTERCEPT.md, "The stand-in"), as X-macro lists. A
 * stand-in exports exactly one list; the auditor hands a program a
 * stand-in only for a library whose exported functions are exactly that
 * list, so every symbol the real library has resolves, and none it lacks.
 * Measured with readelf --dyn-syms: the CUDA 13.0 toolkit's libnvrtc.so.13
 * (set 130), and the nvidia-cuda-nvrtc 13.5 wheel's (set 135). */
#ifndef PROGCACHE_INTERCEPT_STANDIN_NAMES_H
#define PROGCACHE_INTERCEPT_STANDIN_NAMES_H

#define PROGCACHE__STANDIN_NAMES_130(X)                                                          \
    X(__nvrtcCPEx) X(nvrtcAddNameExpression) X(nvrtcCompileProgram) X(nvrtcCreateProgram)       \
    X(nvrtcDestroyProgram) X(nvrtcGetCUBIN) X(nvrtcGetCUBINSize) X(nvrtcGetErrorString)          \
    X(nvrtcGetLTOIR) X(nvrtcGetLTOIRSize) X(nvrtcGetLoweredName) X(nvrtcGetNumSupportedArchs)    \
    X(nvrtcGetOptiXIR) X(nvrtcGetOptiXIRSize) X(nvrtcGetPCHCreateStatus) X(nvrtcGetPCHHeapSize)  \
    X(nvrtcGetPCHHeapSizeRequired) X(nvrtcGetPTX) X(nvrtcGetPTXSize) X(nvrtcGetProgramLog)       \
    X(nvrtcGetProgramLogSize) X(nvrtcGetSupportedArchs) X(nvrtcSetFlowCallback)                  \
    X(nvrtcSetPCHHeapSize) X(nvrtcVersion)

#define PROGCACHE__STANDIN_NAMES_135(X)                                                          \
    PROGCACHE__STANDIN_NAMES_130(X)                                                              \
    X(__nvrtcNvvmHandle) X(nvrtcGetBundledHeadersInfo) X(nvrtcGetTileIR) X(nvrtcGetTileIRSize)   \
    X(nvrtcInstallBundledHeaders) X(nvrtcRemoveBundledHeaders)

/* The stand-ins, in the order the auditor tries them: the folder beside the
 * auditor that holds each one's libnvrtc.so.13. */
#define PROGCACHE__STANDIN_SETS 2
#define PROGCACHE__STANDIN_DIR_130 "progcache-nvrtc-13.0"
#define PROGCACHE__STANDIN_DIR_135 "progcache-nvrtc-13.5"

/* The soname the stand-ins answer for (the NVRTC 13 ABI). */
#define PROGCACHE__STANDIN_SONAME "libnvrtc.so.13"

#endif
