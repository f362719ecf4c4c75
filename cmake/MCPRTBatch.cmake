# mcprt_batched(OUT NAME SIZE SOURCES...): OUT gets SOURCES compiled SIZE at a
# time, each batch one translation unit that #includes its files. CAF,
# nlohmann_json and GoogleTest are then parsed, and their templates
# instantiated and compiled, once per batch instead of once per file.
#
# The batch files include the sources by their path in the checkout (found
# through the checkout's include directory), not by an absolute path as
# CMake's own UNITY_BUILD does, so ccache's objects stay valid in a clone
# elsewhere. SIZE 1 (or one source) compiles each file alone.
function(mcprt_batched out name size)
  list(LENGTH ARGN n)
  if(size LESS_EQUAL 1 OR n LESS_EQUAL 1)
    set(${out} ${ARGN} PARENT_SCOPE)
    return()
  endif()
  # As many batches as SIZE asks, filled evenly.
  math(EXPR batches "(${n} + ${size} - 1) / ${size}")
  set(result)
  set(i 0)
  foreach(b RANGE 1 ${batches})
    math(EXPR end "(${n} * ${b}) / ${batches}")
    # A type with a member from a file's anonymous namespace is fine in that
    # file; GCC warns about it once the file is #included instead.
    set(content "#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC diagnostic ignored \"-Wsubobject-linkage\"\n#endif\n")
    while(i LESS end)
      list(GET ARGN ${i} f)
      file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${f}")
      string(APPEND content "#include \"${rel}\"\n")
      math(EXPR i "${i} + 1")
    endwhile()
    set(batch "${CMAKE_CURRENT_BINARY_DIR}/batches/${name}_${b}.cpp")
    # Rewritten only when its list changes, so that a configure run does not
    # recompile what it batches.
    file(CONFIGURE OUTPUT "${batch}" CONTENT "${content}" @ONLY)
    list(APPEND result "${batch}")
  endforeach()
  set(${out} ${result} PARENT_SCOPE)
endfunction()
