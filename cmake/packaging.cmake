# Packages (docs/OPERATIONS.md, "Packages"): `cpack` in the build tree makes
# three .deb files, and three .rpm files when rpmbuild is installed:
#   libprogcache0      the shared library and libexec/progcache/progcache-nvrtc-helper
#   libprogcache-dev   headers, the static library, the CMake package, progcache.pc
#   progcache          the command, its man page, bash/zsh/fish completion, the
#                      sample and contrib/ (the node_exporter recipe)
# Installed under /usr. tests/install/test_package.sh builds, installs, uses
# and removes the .deb files.
set(CPACK_PACKAGE_NAME progcache)
set(CPACK_PACKAGE_VENDOR "progcache")
set(CPACK_PACKAGE_CONTACT "progcache maintainers <progcache@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_COMPONENTS_ALL runtime dev tools)
set(CPACK_COMPONENT_DEV_DEPENDS runtime)
set(CPACK_COMPONENT_TOOLS_DEPENDS runtime)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)

set(CPACK_GENERATOR DEB)
find_program(PROGCACHE_RPMBUILD rpmbuild)
if(PROGCACHE_RPMBUILD)
  list(APPEND CPACK_GENERATOR RPM)
endif()

# Debian: one package per component, named as Debian names libraries.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libprogcache${PROJECT_VERSION_MAJOR})
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libprogcache-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME progcache)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION devel)
# The dependencies are written here, not found by dpkg-shlibdeps: the PCH
# helper links NVIDIA's NVRTC, which no Debian package provides (the
# library itself dlopens NVRTC and the driver: neither is a dependency).
set(runtime_depends "libc6 (>= 2.34), libssl3 | libssl3t64")
if(PROGCACHE_HAVE_HIREDIS)
  string(APPEND runtime_depends ", libhiredis0.14 | libhiredis1.1.0")
endif()
if(PROGCACHE_HAVE_CURL) # the HTTP and S3 tier (Debian 12's libcurl4, 13's libcurl4t64)
  string(APPEND runtime_depends ", libcurl4 | libcurl4t64")
endif()
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "${runtime_depends}")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libssl-dev")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "cuda-nvrtc-13-0")
# ldconfig runs after the library is installed or removed.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_GENERATE_SHLIBS ON)

# RPM: the same split.
set(CPACK_RPM_COMPONENT_INSTALL ON)
set(CPACK_RPM_FILE_NAME RPM-DEFAULT)
set(CPACK_RPM_PACKAGE_LICENSE "see LICENSE")
set(CPACK_RPM_RUNTIME_PACKAGE_NAME libprogcache${PROJECT_VERSION_MAJOR})
set(CPACK_RPM_DEV_PACKAGE_NAME libprogcache-devel)
set(CPACK_RPM_TOOLS_PACKAGE_NAME progcache)
set(CPACK_RPM_PACKAGE_AUTOREQ OFF) # NVRTC, as above
set(rpm_requires "openssl-libs")
if(PROGCACHE_HAVE_CURL)
  string(APPEND rpm_requires ", libcurl")
endif()
set(CPACK_RPM_RUNTIME_PACKAGE_REQUIRES "${rpm_requires}")
set(CPACK_RPM_DEV_PACKAGE_REQUIRES "libprogcache${PROJECT_VERSION_MAJOR} = ${PROJECT_VERSION}")
set(CPACK_RPM_TOOLS_PACKAGE_REQUIRES "libprogcache${PROJECT_VERSION_MAJOR} = ${PROJECT_VERSION}")
# Directories every system owns already are not the package's.
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION /usr/libexec /usr/share/man /usr/share/man/man1
  /usr/share/bash-completion /usr/share/bash-completion/completions /usr/share/zsh
  /usr/share/zsh/site-functions /usr/share/fish /usr/share/fish/vendor_completions.d
  /usr/share/doc /usr/lib/pkgconfig /usr/lib/cmake /usr/include)

include(CPack)
