# What cmake/Find*.cmake share once they have looked for a library and its
# header: the found-or-not verdict for package `pkg` (REQUIRED_VARS the two
# cache variables named), an imported target `target` over what was found,
# and the two variables hidden from the cache's basic view. A macro, so
# `pkg`_FOUND lands in the Find module's scope. Installed beside them.
macro(zrt_import_found pkg target library_var include_var)
  include(FindPackageHandleStandardArgs)
  find_package_handle_standard_args(${pkg} REQUIRED_VARS ${library_var} ${include_var})
  if(${pkg}_FOUND AND NOT TARGET ${target})
    add_library(${target} UNKNOWN IMPORTED)
    set_target_properties(${target} PROPERTIES
      IMPORTED_LOCATION "${${library_var}}"
      INTERFACE_INCLUDE_DIRECTORIES "${${include_var}}")
  endif()
  mark_as_advanced(${include_var} ${library_var})
endmacro()
