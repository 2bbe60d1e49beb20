# Runs a command and checks its exit status and output (used by tests of the command-line tools).
#   cmake -DCOMMAND="prog;arg;..." [-DINPUT=file] [-DEXPECT_STATUS=n] [-DEXPECT_REGEX=re]
#         [-DREJECT_REGEX=re] -P run_and_check.cmake
if(NOT DEFINED EXPECT_STATUS)
  set(EXPECT_STATUS 0)
endif()
set(input_args "")
if(DEFINED INPUT)
  set(input_args INPUT_FILE "${INPUT}")
endif()
execute_process(COMMAND ${COMMAND} ${input_args} RESULT_VARIABLE status OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
set(all "${out}${err}")
if(NOT status EQUAL EXPECT_STATUS)
  message(FATAL_ERROR "exit status ${status}, expected ${EXPECT_STATUS}\n--- output ---\n${all}")
endif()
if(DEFINED EXPECT_REGEX AND NOT all MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "output does not match '${EXPECT_REGEX}'\n--- output ---\n${all}")
endif()
if(DEFINED REJECT_REGEX AND all MATCHES "${REJECT_REGEX}")
  message(FATAL_ERROR "output matches '${REJECT_REGEX}'\n--- output ---\n${all}")
endif()
