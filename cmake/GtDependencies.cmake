# Third-party libraries, all well-kept Debian packages found through pkg-config or CMake.
# Each becomes an IMPORTED target PkgConfig::<NAME>; modules link only what they use.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

pkg_check_modules(YAML REQUIRED IMPORTED_TARGET yaml-0.1)        # libyaml-dev
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)      # libjansson-dev
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)         # libzstd-dev
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)     # libxxhash-dev
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)     # libsodium-dev
pkg_check_modules(UCX REQUIRED IMPORTED_TARGET ucx)              # libucx-dev
pkg_check_modules(FABRIC REQUIRED IMPORTED_TARGET libfabric)     # libfabric-dev
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)    # libopenblas-dev
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)         # libcurl4-openssl-dev (etcd)
pkg_check_modules(LIBCRYPTO REQUIRED IMPORTED_TARGET libcrypto) # libssl-dev (etcd's TLS certificates)
pkg_check_modules(MHD REQUIRED IMPORTED_TARGET libmicrohttpd)    # libmicrohttpd-dev (metrics)

# UCP lives in libucp, which ucx.pc lists only as a private library on some releases.
find_library(GT_UCP_LIBRARY NAMES ucp HINTS ${UCX_LIBRARY_DIRS} REQUIRED)
find_library(GT_UCS_LIBRARY NAMES ucs HINTS ${UCX_LIBRARY_DIRS} REQUIRED)
add_library(gt_dep_ucx INTERFACE)
target_link_libraries(gt_dep_ucx INTERFACE PkgConfig::UCX ${GT_UCP_LIBRARY} ${GT_UCS_LIBRARY})

# OpenMPI: optional for the build (a one-rank site needs no MPI), used by local/.
find_package(MPI COMPONENTS C QUIET)

set(GT_PKGCONFIG_REQUIRES "yaml-0.1 jansson libzstd libxxhash libsodium ucx libfabric openblas libcurl libmicrohttpd")
