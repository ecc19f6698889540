# unit_tests: every binary that the tests labelled unit run (`--target unit_tests` builds what
# `ctest -L unit` needs, and nothing else: CI's CPU-only build). A unit test run by add_test adds
# its binaries to it with add_dependencies(unit_tests ...).
add_custom_target(unit_tests)

# search_test(NAME SOURCES... LIBS ... [LABELS ...]): one GoogleTest binary per test file,
# discovered by CTest; label unit unless LABELS says otherwise (unit ones join unit_tests).
function(search_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  set(labels unit)
  if(T_LABELS)
    set(labels ${T_LABELS})
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${labels}")
  if("unit" IN_LIST labels)
    add_dependencies(unit_tests ${name})
  endif()
endfunction()
