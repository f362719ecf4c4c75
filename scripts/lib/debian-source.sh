# Sourced by scripts/build-*-tsan.sh: fetches and unpacks the Debian source
# package of an installed library with apt, from the mirror the library came
# from, through a private apt state (the system's apt sources are not
# touched, and no root is needed).
#
#   debian_source BINARY_PACKAGE WORKDIR
#
# leaves the patched upstream tree in $debian_tree and its upstream tarball
# in $debian_orig_tarball (the caller checks its hash). Debian's patches are
# applied when the mirror has Debian's part of the package; some mirrors
# answer 404 for it, and then $debian_patched is "no".

debian_source() {
  local package=$1 work=$2
  local source_name version
  source_name=$(dpkg-query -W -f='${source:Package}' "$package" 2>/dev/null) ||
    { echo "$package is not installed (run scripts/setup.sh)" >&2; return 1; }
  version=$(dpkg-query -W -f='${source:Version}' "$package")
  version=${version#*:}
  local upstream=${version%-*}

  # The archive the package was installed from, e.g. "http://deb.debian.org/debian bookworm".
  local mirror suite
  read -r mirror suite < <(apt-cache policy "$package" |
    awk '/^ +[0-9]+ (https?|file):/ && $3 ~ /\/main$/ { sub(/\/main$/, "", $3); print $2, $3; exit }') || true
  : "${mirror:=http://deb.debian.org/debian}" "${suite:=bookworm}"
  local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  [[ -r $keyring ]] || { echo "no $keyring (apt-get install debian-archive-keyring)" >&2; return 1; }

  local apt_dir=$work/apt
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$work/download" "$work/src"
  echo "deb-src [signed-by=$keyring] $mirror $suite main" >"$apt_dir/sources.list"
  local apt_opts=(
    -o "Dir::Etc::SourceList=$apt_dir/sources.list"
    -o "Dir::Etc::SourceParts=$apt_dir/none"
    -o "Dir::State::Lists=$apt_dir/lists"
    -o "Dir::Cache=$apt_dir/cache"
    -o "APT::Sandbox::User=$(id -un)"
  )
  echo "fetching $source_name $version from $mirror $suite" >&2
  apt-get -qq "${apt_opts[@]}" update >&2 ||
    { echo "apt-get update of the deb-src index failed" >&2; return 1; }
  # apt-get fails when any part is missing; what is there is checked below.
  (cd "$work/download" && apt-get -qq "${apt_opts[@]}" source --download-only \
    "$source_name=$version" >&2) || true

  debian_orig_tarball=$(ls "$work/download/${source_name}_${upstream}.orig.tar."* 2>/dev/null | head -n1)
  [[ -n $debian_orig_tarball ]] ||
    { echo "apt-get source did not deliver the upstream tarball of $source_name $version" >&2; return 1; }
  tar -xf "$debian_orig_tarball" -C "$work/src"
  debian_tree=$(find "$work/src" -mindepth 1 -maxdepth 1 -type d | head -n1)
  [[ -n $debian_tree ]] || { echo "$debian_orig_tarball holds no directory" >&2; return 1; }

  local debian_part
  debian_part=$(ls "$work/download/${source_name}_${version}.debian.tar."* 2>/dev/null | head -n1)
  debian_patched=no
  if [[ -n $debian_part ]]; then
    tar -xf "$debian_part" -C "$debian_tree"
    if [[ -f $debian_tree/debian/patches/series ]]; then
      local patch_name
      while read -r patch_name _; do
        [[ -z $patch_name || $patch_name == \#* ]] && continue
        echo "applying Debian's patch $patch_name" >&2
        patch -s -d "$debian_tree" -p1 <"$debian_tree/debian/patches/$patch_name" >&2 || return 1
      done <"$debian_tree/debian/patches/series"
    fi
    debian_patched=yes
  fi
}

# ensure_commands COMMAND=PACKAGE...: installs the Debian package of every
# command that is missing (as root, or through sudo).
ensure_commands() {
  local missing=() pair
  for pair in "$@"; do
    command -v "${pair%%=*}" >/dev/null 2>&1 || missing+=("${pair#*=}")
  done
  ((${#missing[@]})) || return 0
  echo "installing ${missing[*]}" >&2
  local sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq >&2 &&
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >&2
}
