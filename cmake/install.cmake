# SPDX-License-Identifier: MIT
# Install rules (GNUInstallDirs, DESTDIR honoured by `cmake --install`):
#   lib/libkcache.so.0.1.0, libkcache.so.0, libkcache.so (or libkcache.a)
#   include/kcache.h
#   bin/kcache                      (RUNPATH $ORIGIN/../lib)
#   libexec/kcache/kcache-clc       (the OpenCL compile helper)
#   lib/pkgconfig/kcache.pc
#   lib/cmake/kcache/kcacheConfig.cmake, kcacheConfigVersion.cmake,
#                    kcacheTargets*.cmake (imported target kcache::kcache)
#   share/man/man1/kcache.1
#   share/doc/kcache/LICENSE
# Included from the top-level CMakeLists.txt.

include(CMakePackageConfigHelpers)

set(KC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kcache)

install(TARGETS kcache EXPORT kcacheTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/kcache.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(TARGETS kcache_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
if(TARGET kcache-clc) # the OpenCL compile helper, found by the library from its own folder
  install(TARGETS kcache-clc RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/kcache COMPONENT runtime)
endif()
install(FILES ${PROJECT_SOURCE_DIR}/doc/man/kcache.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)

# pkg-config: a static libkcache.a needs -ldl -lpthread at the link
# (`pkg-config --static`); the shared library carries them itself. The
# prefix is the one of the install (`cmake --install --prefix P` included),
# so the file is written at install time from a copy configured now.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(KC_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(KC_PC_LIBDIR "\${exec_prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(KC_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(KC_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
set(KC_PC_PREFIX "@KC_INSTALL_PREFIX@") # filled in at install time
configure_file(${PROJECT_SOURCE_DIR}/cmake/kcache.pc.in ${PROJECT_BINARY_DIR}/kcache.pc.at-install @ONLY)
install(CODE "set(KC_INSTALL_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${PROJECT_BINARY_DIR}/kcache.pc.at-install\" \"${PROJECT_BINARY_DIR}/kcache.pc\" @ONLY)"
        COMPONENT dev)
install(FILES ${PROJECT_BINARY_DIR}/kcache.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# The CMake package: find_package(kcache 0.1) then link kcache::kcache.
install(EXPORT kcacheTargets NAMESPACE kcache:: DESTINATION ${KC_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kcacheConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/kcacheConfig.cmake INSTALL_DESTINATION ${KC_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kcacheConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kcacheConfig.cmake ${PROJECT_BINARY_DIR}/kcacheConfigVersion.cmake
        DESTINATION ${KC_CMAKE_DIR} COMPONENT dev)
