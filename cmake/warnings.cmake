# Compiler flags shared by every cohort target: warnings, sanitizers, target architecture.
add_library(cohort_flags INTERFACE)
target_compile_options(cohort_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${COHORT_WERROR}>>:-Werror>)
# GCC 12's -Wrestrict fires on `"literal" + std::string(...)` inside libstdc++ (GCC bug 105651,
# a false positive fixed in GCC 13); with -Werror it would reject correct code.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(cohort_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
endif()
if(COHORT_ARCH AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  target_compile_options(cohort_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=${COHORT_ARCH}>)
endif()
if(COHORT_SANITIZE)
  target_compile_options(cohort_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined>)
  target_link_options(cohort_flags INTERFACE -fsanitize=address,undefined)
endif()
target_include_directories(cohort_flags INTERFACE ${PROJECT_SOURCE_DIR})
