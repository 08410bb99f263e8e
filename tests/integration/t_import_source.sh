#!/bin/bash
# A source given in the wrong form is refused, not imported as something else: an OCI layout
# without oci: (its blobs would become the image), a docker-archive or OCI-archive tar
# without a prefix (the archive's own members would), a transport lazyblk does not have
# (containers-storage:, foo:). Each gives one line naming the right form, exits non-zero and
# writes no manifest and no store. A plain path with ':' in it still imports, and so does a
# tar of an image's root, and oci-archive: (issue 16) and docker:// are transports now.
. "$(dirname "$0")/lib/common.sh"
for tool in umoci skopeo; do
	command -v "$tool" >/dev/null || skip "skip: $tool is not installed"
done
cd "$T"
umoci init --layout img >/dev/null
umoci new --image img:t >/dev/null
umoci unpack --rootless --image img:t b >/dev/null 2>&1
echo hello >b/rootfs/hello
umoci repack --image img:t b >/dev/null 2>&1
skopeo copy -q oci:img:t docker-archive:docker.tar:x:y >/dev/null
skopeo copy -q oci:img:t oci-archive:oci.tar >/dev/null
tar -C img -cf layout.tar .                        # an OCI archive made by hand
tar -C b/rootfs -cf root.tar .                     # an ordinary tar of the image's files
mkdir unpacked && tar -C unpacked -xf docker.tar   # a docker archive, unpacked

imp() { "$LAZYBLK" import "$1" --store "$T/store" -o "$T/out.manifest"; }
expect_error "OCI layout as a DIR" "img is an OCI image layout; to import the image, use oci:img" -- imp img
expect_error "docker archive as a FILE.tar" "docker.tar is a docker archive; to import the image, use docker-archive:docker.tar" -- imp docker.tar
expect_error "OCI archive as a FILE.tar" "oci.tar is an OCI image archive" -- imp oci.tar
grep -qF "use oci-archive:oci.tar" "$T/.err" || die "OCI archive: no oci-archive: in $(cat "$T/.err")"
expect_error "hand-made OCI archive" "layout.tar is an OCI image archive" -- imp layout.tar
expect_error "unpacked docker archive" "use docker-archive:FILE.tar" -- imp unpacked
expect_error "containers-storage: transport" "unknown source transport 'containers-storage:' (SRC is DIR, FILE.tar[.gz|.zst|.xz], oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE.tar or docker://HOST[:PORT]/REPO[:TAG|@DIGEST])" -- imp containers-storage:busybox
expect_error "docker:// without a host" "want docker://HOST[:PORT]/REPO[:TAG|@sha256:DIGEST]" -- imp docker://busybox
expect_error "made-up transport" "unknown source transport 'foo:'" -- imp foo:bar
[ ! -e out.manifest ] || die "a manifest was written for a misused source"
[ ! -e store ] || die "a store was made for a misused source"

# what is right still imports
mkdir -p with:colon && echo x >with:colon/f
imp with:colon >/dev/null
imp root.tar >/dev/null
imp oci:img:t >/dev/null
imp docker-archive:docker.tar >/dev/null
imp oci-archive:oci.tar >/dev/null
echo "ok: with:colon, a tar of a root, oci:img:t, docker-archive:docker.tar and oci-archive:oci.tar import"
