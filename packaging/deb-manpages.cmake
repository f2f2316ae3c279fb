# Run by cpack (CPACK_PRE_BUILD_SCRIPTS) on the staged package tree, before the
# .deb is made: compress the man pages with "gzip -9n", as Debian ships them
# (Debian Policy 12.1). -n leaves out the name and time stamp, so the result
# depends on the page alone. "cmake --install" keeps them uncompressed.
# Also puts the Debian changelog (packaging/changelog) into the package as
# /usr/share/doc/rdmacp/changelog.gz, compressed the same way; a plain
# "cmake --install" does not install it.
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

set(_doc "${CPACK_TEMPORARY_INSTALL_DIRECTORY}${CPACK_PACKAGING_INSTALL_PREFIX}/share/doc/rdmacp")
file(MAKE_DIRECTORY "${_doc}")
file(COPY_FILE "${CPACK_RDMACP_CHANGELOG}" "${_doc}/changelog")
execute_process(COMMAND gzip -9nf "${_doc}/changelog" RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
	message(FATAL_ERROR "gzip -9n ${_doc}/changelog failed: ${_rc}")
endif()
