# install-missing.sh - sourced by the ci-deps scripts: install_missing PKG... apt-get installs
# those of the Debian packages that are not installed yet (nothing, quickly, on a second run).
install_missing() {
	need_pkgs=""
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
			need_pkgs="$need_pkgs $p"
	done
	if [ -n "$need_pkgs" ]; then
		apt-get update -q
		# shellcheck disable=SC2086
		apt-get install -y -q --no-install-recommends $need_pkgs
	fi
}
