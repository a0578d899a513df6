# Finds deltafin's libraries as Debian installs them (apt: scripts/setup) and as
# Homebrew does on macOS (brew install ...: README "On a Mac"), and works out what
# can be linked with the C++ standard library in use.
#
# Debian's fmt, googletest and cpp-httplib are compiled against libstdc++; a build
# with clang's libc++ (scripts/test-clang) cannot link them. Then fmt is used
# header-only and googletest is built from Debian's source package (googletest,
# /usr/src/googletest). Debian's cpp-httplib has no header-only form (its header
# is split from a compiled library), so under libc++ with it the HTTP parts that
# need it (the deltafin program, the unit tests that start an httplib server)
# are compiled, not linked: DELTAFIN_HTTPLIB_LINKS is OFF. Homebrew's cpp-httplib
# is header-only and links with either library.
#
# Defines: DELTAFIN_FMT (target), DELTAFIN_HTTPLIB (target), DELTAFIN_HTTPLIB_LINKS,
# DELTAFIN_LIBCXX, DELTAFIN_GTEST (targets, for tests/).
include(CheckCXXSourceCompiles)

if(APPLE)
  # Homebrew's prefix (/opt/homebrew on Apple Silicon, /usr/local on Intel) for
  # find_package, and its pkg-config files, curl's too (keg-only: not linked into the prefix).
  find_program(BREW_EXECUTABLE brew)
  if(BREW_EXECUTABLE)
    execute_process(COMMAND ${BREW_EXECUTABLE} --prefix OUTPUT_VARIABLE BREW_PREFIX
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  if(BREW_PREFIX)
    list(APPEND CMAKE_PREFIX_PATH ${BREW_PREFIX})
    set(ENV{PKG_CONFIG_PATH} "${BREW_PREFIX}/opt/curl/lib/pkgconfig:${BREW_PREFIX}/lib/pkgconfig:$ENV{PKG_CONFIG_PATH}")
  endif()
endif()

find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)

check_cxx_source_compiles("#include <version>
#ifndef _LIBCPP_VERSION
#error not libc++
#endif
int main() { return 0; }" DELTAFIN_LIBCXX)

# Does a library link with this compiler and standard library? The probe calls a
# function that takes a std::string: one without would link across the two
# libraries' ABIs and fail at run time.
function(deltafin_links var libs source)
  set(CMAKE_REQUIRED_LIBRARIES ${libs})
  set(CMAKE_REQUIRED_QUIET ON)
  check_cxx_source_compiles("${source}" ${var})
endfunction()

deltafin_links(DELTAFIN_FMT_LINKS fmt::fmt
  "#include <fmt/format.h>\nint main() { return int(fmt::format(\"{}\", 1).size()); }")
if(DELTAFIN_FMT_LINKS)
  set(DELTAFIN_FMT fmt::fmt)
else()
  message(STATUS "fmt's library does not link with this standard library: fmt header-only")
  set(DELTAFIN_FMT fmt::fmt-header-only)
endif()

# cpp-httplib: Homebrew's CMake package (header-only), else Debian's pkg-config one,
# whose Cflags must match the build.
find_package(httplib CONFIG QUIET)
if(TARGET httplib::httplib)
  set(DELTAFIN_HTTPLIB httplib::httplib)
else()
  pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
  set(DELTAFIN_HTTPLIB PkgConfig::HTTPLIB)
endif()
deltafin_links(DELTAFIN_HTTPLIB_LINKS ${DELTAFIN_HTTPLIB}
  "#include <httplib.h>\nint main() { httplib::Client c(std::string(\"http://localhost:1\")); return c.Get(std::string(\"/\")) ? 1 : 0; }")
if(NOT DELTAFIN_HTTPLIB_LINKS)
  # Its header and flags, without the library.
  add_library(deltafin_httplib_headers INTERFACE)
  foreach(prop INTERFACE_INCLUDE_DIRECTORIES INTERFACE_COMPILE_OPTIONS INTERFACE_COMPILE_DEFINITIONS)
    get_target_property(value ${DELTAFIN_HTTPLIB} ${prop})
    if(value)
      set_property(TARGET deltafin_httplib_headers PROPERTY ${prop} ${value})
    endif()
  endforeach()
  set(DELTAFIN_HTTPLIB deltafin_httplib_headers)
  message(WARNING "cpp-httplib does not link with this standard library (Debian's is built for libstdc++): "
                  "the deltafin program and the unit tests that start an httplib server are compiled, not linked")
endif()

find_package(GTest QUIET)
if(GTest_FOUND)
  deltafin_links(DELTAFIN_GTEST_LINKS "GTest::gtest;GTest::gtest_main"
    "#include <gtest/gtest.h>\nTEST(Links, One) { EXPECT_EQ(1, 1); }")
endif()
set(DELTAFIN_GTEST_SOURCE /usr/src/googletest CACHE PATH
    "googletest's sources, built when no installed googletest links")
if(NOT DELTAFIN_GTEST_LINKS)
  if(NOT EXISTS ${DELTAFIN_GTEST_SOURCE}/CMakeLists.txt)
    message(FATAL_ERROR "googletest: no installed library links with this standard library, and there are no "
                        "sources at ${DELTAFIN_GTEST_SOURCE} (Debian: apt-get install googletest)")
  endif()
  message(STATUS "googletest: built from ${DELTAFIN_GTEST_SOURCE}")
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  add_subdirectory(${DELTAFIN_GTEST_SOURCE} ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
  set(DELTAFIN_GTEST gtest gtest_main)
else()
  set(DELTAFIN_GTEST GTest::gtest GTest::gtest_main)
endif()
