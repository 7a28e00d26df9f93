# Warnings and sanitizers shared by every target. gt_target_defaults(t) applies them.
# -Wno-format-truncation: snprintf into bounded buffers truncates by design (paths, messages);
# gcc's estimate of it changes with the optimisation level, which made Debug and Release
# builds disagree. Where a truncated result would be wrong, the code checks the return value.
set(GT_C_WARNINGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
    -Wno-unused-parameter)
if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
  list(APPEND GT_C_WARNINGS -Wno-format-truncation)
endif()
if(GT_WERROR)
  list(APPEND GT_C_WARNINGS -Werror)
endif()
if(GT_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

function(gt_target_defaults target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:${GT_C_WARNINGS}>
    $<$<COMPILE_LANGUAGE:C>:-fvisibility=hidden>)
  target_compile_definitions(${target} PRIVATE _GNU_SOURCE GT_BUILDING_LIBRARY)
endfunction()
