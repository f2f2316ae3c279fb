# Run by cpack (CPACK_PRE_BUILD_SCRIPTS) on the staged package tree, before the
# .deb is made: compress the man pages with "gzip -9n", as Debian ships them
# (Debian Policy 12.1). -n leaves out the name and time stamp, so the result
# depends on the page alone. "cmake --install" keeps them uncompressed.
file(GLOB_RECURSE _pages
	"${CPACK_TEMPORARY_INSTALL_DIRECTORY}${CPACK_PACKAGING_INSTALL_PREFIX}/share/man/*")
foreach(_page IN LISTS _pages)
	if(_page MATCHES "\\.gz$")
		continue()
	endif()
	execute_process(COMMAND gzip -9nf "${_page}" RESULT_VARIABLE _rc)
	if(NOT _rc EQUAL 0)
		message(FATAL_ERROR "gzip -9n ${_page} failed: ${_rc}")
	endif()
endforeach()
