# Runs a command and checks its exit status and output (used by tests of the command-line tools).
#   cmake -DCOMMAND="prog;arg;..." [-DINPUT=file] [-DEXPECT_STATUS=n|nonzero]
#         [-DEXPECT_REGEX=re] [-DEXPECT_STDOUT=re] [-DEXPECT_STDERR=re] [-DREJECT_REGEX=re]
#         -P run_and_check.cmake
# EXPECT_REGEX and REJECT_REGEX match stdout and stderr together; EXPECT_STDOUT and
# EXPECT_STDERR match one stream each.
if(NOT DEFINED EXPECT_STATUS)
  set(EXPECT_STATUS 0)
endif()
set(input_args "")
if(DEFINED INPUT)
  set(input_args INPUT_FILE "${INPUT}")
endif()
execute_process(COMMAND ${COMMAND} ${input_args} RESULT_VARIABLE status OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
set(report "exit status ${status}\n--- stdout ---\n${out}\n--- stderr ---\n${err}")
if(EXPECT_STATUS STREQUAL "nonzero")
  if(status EQUAL 0)
    message(FATAL_ERROR "expected a non-zero exit status\n${report}")
  endif()
elseif(NOT status EQUAL EXPECT_STATUS)
  message(FATAL_ERROR "expected exit status ${EXPECT_STATUS}\n${report}")
endif()
if(DEFINED EXPECT_REGEX AND NOT "${out}${err}" MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "output does not match '${EXPECT_REGEX}'\n${report}")
endif()
if(DEFINED EXPECT_STDOUT AND NOT out MATCHES "${EXPECT_STDOUT}")
  message(FATAL_ERROR "stdout does not match '${EXPECT_STDOUT}'\n${report}")
endif()
if(DEFINED EXPECT_STDERR AND NOT err MATCHES "${EXPECT_STDERR}")
  message(FATAL_ERROR "stderr does not match '${EXPECT_STDERR}'\n${report}")
endif()
if(DEFINED REJECT_REGEX AND "${out}${err}" MATCHES "${REJECT_REGEX}")
  message(FATAL_ERROR "output matches '${REJECT_REGEX}'\n${report}")
endif()
