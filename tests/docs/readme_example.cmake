# Checks that the README's first C++ block is examples/quickstart.cpp, character for character,
# so that the example users read is the one the tests build and run.
#   cmake -DREADME=README.md -DEXAMPLE=examples/quickstart.cpp -P readme_example.cmake
file(READ "${README}" readme)
file(READ "${EXAMPLE}" example)
string(FIND "${readme}" "```cpp\n" begin)
if(begin EQUAL -1)
  message(FATAL_ERROR "${README} has no ```cpp block")
endif()
math(EXPR begin "${begin} + 7")
string(SUBSTRING "${readme}" ${begin} -1 rest)
string(FIND "${rest}" "```" end)
string(SUBSTRING "${rest}" 0 ${end} block)
if(NOT block STREQUAL example)
  message(FATAL_ERROR "the first ```cpp block of ${README} differs from ${EXAMPLE}; copy the "
                      "example into the README (or the README's block into the example)\n"
                      "--- README ---\n${block}--- ${EXAMPLE} ---\n${example}")
endif()
