# Registers every doctest case of one test executable as one CTest test, keeping names whole.
# Run by CMake (-P) after each link of the executable; writes CTEST_FILE, which CTest includes.
#
# doctest's own doctestAddTests.cmake splits the listing into a CMake list, so a case whose
# name holds ';' became two tests that matched nothing, ran nothing and passed. Here a ';' is
# swapped for a placeholder before the listing is split and restored inside bracket
# arguments, and every test fails if doctest reports that it ran no case.
#
# Inputs: TEST_EXECUTABLE, TEST_PREFIX, CTEST_FILE, TEST_WORKING_DIR.

execute_process(
  COMMAND "${TEST_EXECUTABLE}" --list-test-cases --no-version
  OUTPUT_VARIABLE listing
  RESULT_VARIABLE status
  WORKING_DIRECTORY "${TEST_WORKING_DIR}")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "listing the cases of ${TEST_EXECUTABLE} failed (${status}):\n${listing}")
endif()

set(semicolon_token "@CTWIN_SEMICOLON@")
string(REPLACE ";" "${semicolon_token}" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")

set(script "")
set(count 0)
foreach(line IN LISTS lines)
  if(line STREQUAL "" OR line MATCHES "^===+$" OR line MATCHES "^\\[doctest\\] ")
    continue()
  endif()
  string(REPLACE "${semicolon_token}" ";" name "${line}")
  if(name MATCHES "\\]==\\]")
    message(FATAL_ERROR "test case name cannot be registered (holds ']==]'): ${name}")
  endif()
  # doctest's --test-case filter splits on ',' unless escaped; '\' escapes itself.
  string(REPLACE "\\" "\\\\" filter "${name}")
  string(REPLACE "," "\\," filter "${filter}")
  string(APPEND script
    "add_test([==[${TEST_PREFIX}: ${name}]==] [==[${TEST_EXECUTABLE}]==] [==[--test-case=${filter}]==])\n"
    "set_tests_properties([==[${TEST_PREFIX}: ${name}]==] PROPERTIES WORKING_DIRECTORY [==[${TEST_WORKING_DIR}]==]"
    " FAIL_REGULAR_EXPRESSION [==[test cases: +0 \\|]==])\n")
  math(EXPR count "${count} + 1")
endforeach()

if(count EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} lists no test case")
endif()
file(WRITE "${CTEST_FILE}" "${script}")
