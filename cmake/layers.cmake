# xgrad's layers (docs/design.md), bottom up: runtime -> kernels -> autograd -> nn, optim
# -> distributed -> tools, and text (tokenizers) on the runtime alone, below tools. Each layer is a target of its own whose include path holds only
# what it may use, so an #include that points up, sideways or into another layer's
# internals fails to compile ("No such file"): the arrows are the build's, not a convention.
#
#   xgrad_layer(NAME TYPE OBJECT|SHARED|STATIC [AS_USER] [BELOW layer...]
#               [INTERNALS_OF layer...] SOURCES ... [PUBLIC_HEADERS ...] [INTERNAL_HEADERS ...])
#
# Each header is linked into an include tree at its path from the source root, under
# xgrad/: the public ones into <build>/layers/NAME, the internal ones into
# <build>/layers/NAME-internal. The layer's sources see
#   - its own two trees,
#   - the public trees of the layers BELOW it (and of the layers below those),
#   - the internal trees of the layers named in INTERNALS_OF: a layer built directly on
#     another's internals (autograd's ops on kernels/), said where it is declared.
# Two targets come out:
#   xgrad_NAME           the layer itself; its PUBLIC include path is its public trees;
#   xgrad_NAME_internal  an INTERFACE target with its internal tree (and those of its
#                        INTERNALS_OF, which its internal headers include): for tests,
#                        never exported, never installed.
# PUBLIC_HEADERS are installed; INTERNAL_HEADERS are not, and no public header may include
# one (tests/installed_headers_test.sh compiles each installed header alone). A layer is
# compiled with libxgrad's own settings (xgrad_compile_settings: -march=native, xsimd),
# unless AS_USER: then as a user's program is, with none of them (the tools).
# Linking is the caller's business: the library layers' objects make libxgrad.
set(xgrad_layers_root ${PROJECT_BINARY_DIR}/layers)

# Links each header of `headers` (paths relative to the current source folder) into
# `tree`/xgrad/<its path from the source root>.
function(xgrad_link_headers tree)
  file(REMOVE_RECURSE ${tree})
  foreach(header IN LISTS ARGN)
    file(RELATIVE_PATH path ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/${header})
    get_filename_component(folder ${tree}/xgrad/${path} DIRECTORY)
    file(MAKE_DIRECTORY ${folder})
    file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR}/${header} ${tree}/xgrad/${path} SYMBOLIC)
  endforeach()
endfunction()

function(xgrad_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "AS_USER" "TYPE" "BELOW;INTERNALS_OF;SOURCES;PUBLIC_HEADERS;INTERNAL_HEADERS")
  set(public_tree ${xgrad_layers_root}/${name})
  set(internal_tree ${xgrad_layers_root}/${name}-internal)
  xgrad_link_headers(${public_tree} ${arg_PUBLIC_HEADERS})
  xgrad_link_headers(${internal_tree} ${arg_INTERNAL_HEADERS})
  foreach(header IN LISTS arg_PUBLIC_HEADERS)
    file(RELATIVE_PATH path ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/${header})
    get_filename_component(folder ${path} DIRECTORY)
    install(FILES ${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/xgrad/${folder})
  endforeach()

  # What the layer offers above it: its public tree and everything below it offers.
  set(public_trees ${public_tree})
  foreach(below IN LISTS arg_BELOW)
    get_property(below_trees GLOBAL PROPERTY xgrad_public_trees_${below})
    if(NOT below_trees)
      message(FATAL_ERROR "xgrad_layer(${name}): BELOW ${below}, which is not a layer declared before it")
    endif()
    list(APPEND public_trees ${below_trees})
  endforeach()
  list(REMOVE_DUPLICATES public_trees)
  set_property(GLOBAL PROPERTY xgrad_public_trees_${name} ${public_trees})
  set_property(GLOBAL APPEND PROPERTY xgrad_layer_names ${name})

  add_library(xgrad_${name}_internal INTERFACE)
  target_include_directories(xgrad_${name}_internal INTERFACE $<BUILD_INTERFACE:${internal_tree}>)
  set(reach ${public_trees} ${internal_tree})
  foreach(other IN LISTS arg_INTERNALS_OF)
    target_link_libraries(xgrad_${name}_internal INTERFACE xgrad_${other}_internal)
    list(APPEND reach ${xgrad_layers_root}/${other}-internal)
  endforeach()
  # What the layer may include, as declared: the layering test holds the build to it.
  set_property(GLOBAL PROPERTY xgrad_reach_${name} ${reach})

  add_library(xgrad_${name} ${arg_TYPE} ${arg_SOURCES})
  foreach(tree IN LISTS public_trees)
    target_include_directories(xgrad_${name} PUBLIC $<BUILD_INTERFACE:${tree}>)
  endforeach()
  target_link_libraries(xgrad_${name} PRIVATE xgrad_${name}_internal)
  if(arg_AS_USER)
    target_compile_options(xgrad_${name} PRIVATE -Wall -Wextra)
  else()
    target_link_libraries(xgrad_${name} PRIVATE xgrad_compile_settings)
    set_target_properties(xgrad_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  endif()
endfunction()

# The public include trees of `layers` and of everything below them, in `out`.
function(xgrad_public_trees out)
  set(trees "")
  foreach(layer IN LISTS ARGN)
    get_property(layer_trees GLOBAL PROPERTY xgrad_public_trees_${layer})
    list(APPEND trees ${layer_trees})
  endforeach()
  list(REMOVE_DUPLICATES trees)
  set(${out} ${trees} PARENT_SCOPE)
endfunction()
