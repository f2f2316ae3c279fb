# Packaging with CPack: "cpack -G DEB" in the build directory makes
# rdmacp_VERSION_ARCH.deb (binaries, systemd units, sysusers.d and tmpfiles.d
# files, man pages (gzip -9n), the example config, copyright). Included at the
# end of the top-level CMakeLists.txt.
#
# The package installs under /usr (the distribution layout: /usr/bin,
# /usr/sbin, /usr/lib/systemd/system, /usr/lib/sysusers.d, /usr/lib/tmpfiles.d,
# /usr/share/man, /usr/share/doc/rdmacp). Nothing goes into /etc: the
# configuration and the certificates are the administrator's (README.md, "Run
# the daemon under systemd").
#
# The package is Debian-native and carries packaging/changelog (Debian
# changelog format) as /usr/share/doc/rdmacp/changelog.gz, as Debian Policy
# 12.7 asks; its newest entry must name this project's version (checked
# here). The package is lintian-clean (tests/integration/t_package.sh).
#
# Options:
#   RDMACP_DEB_MAINTAINER   the package's Maintainer: "Name <address>"; the
#                           default's example.org address is a placeholder:
#                           set a real one for packages given to others
#   RDMACP_DEB_SHLIBDEPS    library dependencies from dpkg-shlibdeps (dpkg-dev)
#                           instead of the list below  [ON where it is found]

install(FILES ${CMAKE_CURRENT_LIST_DIR}/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(RDMACP_DEB_MAINTAINER "rdmacp maintainers <rdmacp@example.org>" CACHE STRING
	"Maintainer field of the Debian package")
# Build trees configured before kept the old default, which lintian rejects.
if(RDMACP_DEB_MAINTAINER STREQUAL "rdmacp maintainers <rdmacp@localhost>")
	set_property(CACHE RDMACP_DEB_MAINTAINER PROPERTY VALUE "rdmacp maintainers <rdmacp@example.org>")
endif()

# The changelog's newest entry, "rdmacp (VERSION) ...", is this version.
file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/changelog _changelog_top LIMIT_COUNT 1)
if(NOT _changelog_top MATCHES "^rdmacp \\(${PROJECT_VERSION}\\) ")
	message(FATAL_ERROR "packaging/changelog: the newest entry is '${_changelog_top}', "
		"not version ${PROJECT_VERSION}: add an entry for it")
endif()
# Compressed into the staged package by deb-manpages.cmake.
set(CPACK_RDMACP_CHANGELOG ${CMAKE_CURRENT_LIST_DIR}/changelog)
find_program(DPKG_SHLIBDEPS_EXECUTABLE dpkg-shlibdeps)
if(DPKG_SHLIBDEPS_EXECUTABLE)
	set(_shlibdeps_default ON)
else()
	set(_shlibdeps_default OFF)
endif()
option(RDMACP_DEB_SHLIBDEPS "Debian package dependencies from dpkg-shlibdeps" ${_shlibdeps_default})

set(CPACK_PACKAGE_NAME rdmacp)
set(CPACK_PACKAGE_VENDOR "rdmacp")
set(CPACK_PACKAGE_CONTACT "${RDMACP_DEB_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "copy files between hosts over RDMA (client and daemon)")
set(CPACK_PACKAGE_DESCRIPTION "rdmacp is an rcp-style client and rdmacpd a daemon that exports
directories (modules) the way rsyncd does. The control channel is TLS 1.3
with mutual certificates; data moves with RDMA writes (libibverbs) or over
TCP lanes with the same semantics, and every file is checked (XXH3-128)
before it is renamed into place.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Packages are built from the build tree only; never from a source tarball.
set(CPACK_SOURCE_GENERATOR "")
set(CPACK_GENERATOR DEB)
# Installed binaries without debug information, as Debian ships them.
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${RDMACP_DEB_MAINTAINER}")
# sysusers.d and tmpfiles.d need their tools in postinst (as debhelper's
# dh_installsysusers and dh_installtmpfiles declare them); systemd itself need
# not run.
# rdmacpd.service reloads with /bin/kill (ExecReload=), which is procps's, as
# openssh-server's ssh.service does: a minimal system lacks it.
set(_tool_depends "systemd | systemd-standalone-sysusers | systemd-sysusers, systemd | systemd-standalone-tmpfiles | systemd-tmpfiles, procps")
if(RDMACP_DEB_SHLIBDEPS)
	set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
	set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_tool_depends}")
else()
	# What dpkg-shlibdeps finds on Debian 12 (libc6 from the toolchain).
	set(_lib_depends "libc6 (>= 2.34), libssl3 (>= 3.0.0), libsystemd0, liburing2 (>= 2.1), libxxhash0 (>= 0.8), libinih1, libzstd1 (>= 1.4)")
	if(ENABLE_VERBS)
		string(APPEND _lib_depends ", libibverbs1, librdmacm1")
	endif()
	set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_lib_depends}, ${_tool_depends}")
endif()
# The verbs transport loads the provider of the RDMA device at run time.
if(ENABLE_VERBS)
	set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ibverbs-providers")
endif()
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
	${CMAKE_CURRENT_LIST_DIR}/debian/postinst
	${CMAKE_CURRENT_LIST_DIR}/debian/prerm
	${CMAKE_CURRENT_LIST_DIR}/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_PRE_BUILD_SCRIPTS ${CMAKE_CURRENT_LIST_DIR}/deb-manpages.cmake)

include(CPack)
