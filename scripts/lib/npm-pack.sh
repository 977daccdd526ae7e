# npm_pack PREFIX PKG VERSION SHA256 DIR packs PKG@VERSION from the npm
# registry into DIR, checks the .tgz against SHA256 and prints its name;
# PREFIX starts its messages. Sourced by scripts/testdata.sh and
# scripts/ucd.sh.
npm_pack() {
	local prefix=$1 pkg=$2 version=$3 sum=$4 dir=$5 tgz got
	command -v npm >/dev/null || { echo "$prefix: npm is required (Node.js's npm fetches $pkg)" >&2; exit 1; }
	echo "$prefix: fetching $pkg@$version" >&2
	tgz=$(cd "$dir" && npm pack --silent "$pkg@$version" | tail -n1)
	got=$(sha256sum "$dir/$tgz" | cut -d' ' -f1)
	if [ "$got" != "$sum" ]; then
		echo "$prefix: $pkg@$version: sha256 $got, want $sum" >&2
		exit 1
	fi
	echo "$tgz"
}
