#!/usr/bin/env bash
# Builds the crdplane images: one per service, plus etcd, each FROM scratch
# around static binaries (CGO_ENABLED=0) compiled here on the host, so that no
# base image has to be pulled. Every image runs as 65532:65532 and carries
# crdplane-probe (its health check; there is no shell).
#
#   deploy/images/build.sh                 # all images
#   deploy/images/build.sh gateway etcd    # some
#
# Environment: CRDPLANE_IMAGE_PREFIX (default crdplane), CRDPLANE_TAG
# (default dev), GOARCH (default: the host's), DOCKER (default docker).
# The images are <prefix>/<service>:<tag> and <prefix>/etcd:v3.7.3.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
prefix="${CRDPLANE_IMAGE_PREFIX:-crdplane}"
tag="${CRDPLANE_TAG:-dev}"
etcd_tag="v3.7.3" # go.etcd.io/etcd/server/v3 in go.mod
docker="${DOCKER:-docker}"
services=(gateway registry validator converter storage)
images=("$@")
[ ${#images[@]} -gt 0 ] || images=("${services[@]}" etcd)

work="$root/bin/images"
rm -rf "$work"
mkdir -p "$work/bin"

export CGO_ENABLED=0 GOOS=linux
export GOARCH="${GOARCH:-$(go env GOARCH)}"
pkgs=(./deploy/etcd ./deploy/cmd/crdplane-probe ./deploy/cmd/crdplane-pki)
for s in "${services[@]}"; do pkgs+=("./services/$s/cmd/crdplane-$s"); done
echo "building static binaries for linux/$GOARCH"
go build -trimpath -ldflags "-s -w" -o "$work/bin/" "${pkgs[@]}"

# BuildKit when the buildx plugin is there; else the classic builder (it
# needs nothing more for FROM scratch).
if [ -z "${DOCKER_BUILDKIT:-}" ] && ! "$docker" buildx version >/dev/null 2>&1; then
	export DOCKER_BUILDKIT=0
fi

build_image() {
	local image="$1" ctx="$work/$1" ref files
	mkdir -p "$ctx"
	cp "deploy/images/$image/Dockerfile" "$ctx/"
	case "$image" in
	etcd)
		files=(etcd crdplane-probe)
		mkdir -p "$ctx/data"
		ref="$prefix/etcd:$etcd_tag"
		;;
	gateway)
		files=(crdplane-gateway crdplane-pki crdplane-probe)
		ref="$prefix/$image:$tag"
		;;
	registry | validator | converter | storage)
		files=("crdplane-$image" crdplane-probe)
		mkdir -p "$ctx/data" # the storage image's embedded etcd directory
		ref="$prefix/$image:$tag"
		;;
	*)
		echo "unknown image $image" >&2
		return 2
		;;
	esac
	for f in "${files[@]}"; do ln "$work/bin/$f" "$ctx/$f"; done
	if [ "$image" = converter ]; then
		cp /etc/ssl/certs/ca-certificates.crt "$ctx/" ||
			{ echo "converter image: no /etc/ssl/certs/ca-certificates.crt on this machine" >&2; return 1; }
	fi
	if ! "$docker" build --quiet \
		--label "org.opencontainers.image.source=https://github.com/crdplane/crdplane" \
		--label "org.opencontainers.image.title=crdplane-$image" \
		-t "$ref" "$ctx" >"$ctx/build.log" 2>&1; then
		cat "$ctx/build.log" >&2
		return 1
	fi
	echo "built $ref"
}

pids=()
for image in "${images[@]}"; do
	build_image "$image" &
	pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit $status
