# Runs EXE with ARGS ('|'-separated) and checks its exit status (EXIT: 0 or nonzero) and that
# stdout matches OUT and stderr matches ERR (regular expressions; empty: not checked).
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND "${EXE}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message("exit ${rc}\n--- stdout\n${out}--- stderr\n${err}")
if(EXIT STREQUAL "0" AND NOT rc EQUAL 0)
  message(FATAL_ERROR "expected exit 0")
elseif(EXIT STREQUAL "nonzero" AND rc EQUAL 0)
  message(FATAL_ERROR "expected a non-zero exit")
endif()
if(OUT AND NOT out MATCHES "${OUT}")
  message(FATAL_ERROR "stdout does not match: ${OUT}")
endif()
if(ERR AND NOT err MATCHES "${ERR}")
  message(FATAL_ERROR "stderr does not match: ${ERR}")
endif()
