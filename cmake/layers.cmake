# xgrad's layers (docs/design.md), bottom up: runtime -> kernels -> autograd -> nn, optim
# -> distributed. Each layer is a target of its own whose include path holds only its own
# headers and those of the layers it is given as BELOW, so an #include that points up
# fails to compile ("No such file"): the arrows are the build's, not a convention.
#
#   xgrad_layer(NAME TYPE OBJECT|SHARED [BELOW layer...] SOURCES ...
#               PUBLIC_HEADERS ... [INTERNAL_HEADERS ...])
#
# makes the target xgrad_<NAME> and its include tree <build>/layers/<NAME>/xgrad/..., one
# link per header, at the header's path from the source root. PUBLIC_HEADERS are
# installed; INTERNAL_HEADERS are not (nothing a user includes may include them).
set(xgrad_layers_root ${PROJECT_BINARY_DIR}/layers)

function(xgrad_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "TYPE" "BELOW;SOURCES;PUBLIC_HEADERS;INTERNAL_HEADERS")
  set(tree ${xgrad_layers_root}/${name})
  file(REMOVE_RECURSE ${tree})
  foreach(header IN LISTS arg_PUBLIC_HEADERS arg_INTERNAL_HEADERS)
    file(RELATIVE_PATH path ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/${header})
    get_filename_component(folder ${tree}/xgrad/${path} DIRECTORY)
    file(MAKE_DIRECTORY ${folder})
    file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR}/${header} ${tree}/xgrad/${path} SYMBOLIC)
  endforeach()
  foreach(header IN LISTS arg_PUBLIC_HEADERS)
    file(RELATIVE_PATH path ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/${header})
    get_filename_component(folder ${path} DIRECTORY)
    install(FILES ${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/xgrad/${folder})
  endforeach()

  add_library(xgrad_${name} ${arg_TYPE} ${arg_SOURCES})
  target_include_directories(xgrad_${name} PUBLIC $<BUILD_INTERFACE:${tree}>)
  foreach(below IN LISTS arg_BELOW)
    target_link_libraries(xgrad_${name} PUBLIC xgrad_${below})
  endforeach()
  target_link_libraries(xgrad_${name} PRIVATE xgrad_compile_settings)
  set_target_properties(xgrad_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  set_property(GLOBAL APPEND PROPERTY xgrad_layer_trees ${tree})
endfunction()
