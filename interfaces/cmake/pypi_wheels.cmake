# Shared by every interface package under interfaces/: include it right after project().
#
# It lets an ament_cmake interface package build against the ROS 2 wheels from PyPI (pip with
# scikit-build-core, or colcon in a venv holding those wheels) as well as against a ROS
# distribution, where all three parts below are no-ops. The reasons are in
# docs/ros2-from-pypi.md (§2, pitfalls B1/B2).

if(DEFINED SKBUILD)
  # (1) pip build: let CMake and ament find the ROS packages that the wheels (and the interface
  #     packages built before this one) installed into the venv (<venv>/share/<pkg>/cmake,
  #     <venv>/share/ament_index). A prefix already on AMENT_PREFIX_PATH (a sourced ROS
  #     distribution) stays, after the venv.
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  execute_process(
    COMMAND "${Python3_EXECUTABLE}" -c "import sys; print(sys.prefix)"
    OUTPUT_VARIABLE _erobs_venv
    OUTPUT_STRIP_TRAILING_WHITESPACE
    COMMAND_ERROR_IS_FATAL ANY)
  list(PREPEND CMAKE_PREFIX_PATH "${_erobs_venv}")
  if(DEFINED ENV{AMENT_PREFIX_PATH} AND NOT "$ENV{AMENT_PREFIX_PATH}" STREQUAL "")
    set(ENV{AMENT_PREFIX_PATH} "${_erobs_venv}:$ENV{AMENT_PREFIX_PATH}")
  else()
    set(ENV{AMENT_PREFIX_PATH} "${_erobs_venv}")
  endif()
endif()

# (2) The PyPI wheels export *__rosidl_generator_py targets whose INTERFACE_INCLUDE_DIRECTORIES
#     name the wheel build host's /opt/python/cp311-cp311/... (absent here), so CMake's generate
#     step fails, with pip and with colcon alike. At the end of the including directory (after
#     every find_package, also those rosidl_generate_interfaces makes), point them at this
#     interpreter's and numpy's include directories. Against a ROS distribution no target
#     matches: a no-op.
function(_erobs_fix_pypi_wheel_targets)
  get_property(_imported DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}" PROPERTY IMPORTED_TARGETS)
  set(_wheel_targets "")
  foreach(_target IN LISTS _imported)
    get_target_property(_include_dirs ${_target} INTERFACE_INCLUDE_DIRECTORIES)
    if(_include_dirs AND "${_include_dirs}" MATCHES "/opt/python/")
      list(APPEND _wheel_targets ${_target})
    endif()
  endforeach()
  if(_wheel_targets)
    find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module NumPy)
    foreach(_target IN LISTS _wheel_targets)
      set_target_properties(${_target} PROPERTIES
        INTERFACE_INCLUDE_DIRECTORIES "${Python3_INCLUDE_DIRS};${Python3_NumPy_INCLUDE_DIRS}")
    endforeach()
  endif()
endfunction()
cmake_language(DEFER CALL _erobs_fix_pypi_wheel_targets)

# (3) pip build: C and Python only. erobs_bt uses these packages from rclpy alone, which loads
#     the C type supports (rosidl_typesupport_c dispatching to _fastrtps_c and _introspection_c)
#     and the Python bindings. The four C++ generators (rosidl_generator_cpp,
#     rosidl_typesupport_cpp, rosidl_typesupport_fastrtps_cpp, rosidl_typesupport_introspection_cpp)
#     would about double the compile time of `make setup` for code nothing here includes.
#     find_package(rosidl_default_generators) registers every generator as an extension of
#     rosidl_generate_interfaces(); it is found here first (the package's own find_package of it
#     is then a no-op: ament's config files are included once) and the C++ ones are removed.
#     The type hashes do not depend on it (test/test_interop_hashes.py checks them). Configure
#     with -DEROBS_BT_INTERFACES_CXX=ON to keep the C++ code; colcon and ROS distribution builds
#     (no SKBUILD) always keep every generator.
option(EROBS_BT_INTERFACES_CXX "pip build: also generate the C++ messages and type supports" OFF)
if(DEFINED SKBUILD AND NOT EROBS_BT_INTERFACES_CXX)
  find_package(rosidl_default_generators REQUIRED)
  foreach(_erobs_generator IN ITEMS rosidl_generator_cpp rosidl_typesupport_cpp
                                    rosidl_typesupport_fastrtps_cpp rosidl_typesupport_introspection_cpp)
    list(FILTER AMENT_EXTENSIONS_rosidl_generate_idl_interfaces EXCLUDE REGEX "^${_erobs_generator}:")
  endforeach()
endif()
