# Cross-compiling for 64-bit Arm Linux with Debian's toolchain (g++-aarch64-linux-gnu)
# against the arm64 libraries that multiarch installs beside the host's
# (libcurl4-openssl-dev:arm64 ...; scripts/setup --test installs both). Test binaries
# run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR), which also lets gtest list them.
#   cmake -B build-aarch64 -G Ninja --toolchain cmake/aarch64-linux-gnu.cmake
# scripts/test-aarch64 builds and runs what CI checks this way.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Libraries and CMake packages from the arm64 multiarch directories only; programs
# (pkg-config, qemu) from the host.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

find_program(DELTAFIN_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(DELTAFIN_QEMU_AARCH64)
  # -L: the loader and libc of the cross toolchain; other arm64 libraries are found
  # at their multiarch paths on the host.
  set(CMAKE_CROSSCOMPILING_EMULATOR "${DELTAFIN_QEMU_AARCH64};-L;/usr/aarch64-linux-gnu")
endif()
