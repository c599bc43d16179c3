#!/usr/bin/env bash
# Lay out the PDF folder of one question set from Debian 12 (bookworm) packages:
#   benchmarks/questions/fetch_pdf_sets.sh stats    runs/stats-docs      # stats_papers.jsonl
#   benchmarks/questions/fetch_pdf_sets.sh survival runs/survival-docs   # survival_vignettes.jsonl
# Needs apt-get (after `apt-get update`) and dpkg-deb; root is not required for `apt-get download`.
# The PDFs are R package vignettes (GPL-2 or later per the packages' copyright files); they are
# copied flat into TARGET and checked against the checksums the questions were written from.
set -euo pipefail

usage() { echo "usage: $0 stats|survival TARGET" >&2; exit 2; }
[ $# -eq 2 ] || usage
set_name=$1 target=$2

# Each line: package=version  path-under-/usr/lib/R  sha256
case $set_name in
stats) files="
r-cran-sandwich=3.0-2-1 site-library/sandwich/doc/sandwich.pdf ab762c22ff2d6b0c26e6e642171f116a11ec4dcfe58821148bdf41856f293a1b
r-cran-sandwich=3.0-2-1 site-library/sandwich/doc/sandwich-CL.pdf f3a765482a629c8c9369020d13632ec5c37520df17e22266eb9e2928270e94bb
r-cran-lme4=1.1-31-1 site-library/lme4/doc/lmer.pdf d13d6caf549b44c3543d01a7445c327ac472d266a8aee24f68a8d31d45d02ec9
r-cran-strucchange=1.5-3-1 site-library/strucchange/doc/strucchange-intro.pdf 56587481ea07ff51645290c24e328d4461656bcbf19d6e9426056e7559a4a198
r-cran-zoo=1.8-11-1 site-library/zoo/doc/zoo.pdf fd63de7b0dc3122272339ff49e6ceeb47ea71a89a9cb5b7c411c78a7d6c8c332
r-cran-pscl=1.5.5-1+b1 site-library/pscl/doc/countreg.pdf 8ff9cb8331837ff2d21c4a840efbe4e5bdc10a1008edc0c39b8ba47d145cea04
r-cran-partykit=1.2-16-1 site-library/partykit/doc/ctree.pdf 5763d9a1d4653a4cef64c04a8cf6bf1dc9d47c1709b1bef122317be83b3129d0
r-cran-quantreg=5.94-1 site-library/quantreg/doc/rq.pdf 7cced1efe41449cf450b24b9eff5974b83f0a56eb5a40ad58b7d8247993afa3b
r-cran-multcomp=1.4-22-1 site-library/multcomp/doc/generalsiminf.pdf 261ba9e67d6b237891ccd8338f8b3e28b31f51b78b4fbe1fa5b392f998bef5e2
r-cran-vcd=1:1.4-11-1 site-library/vcd/doc/residual-shadings.pdf 936f618b11c4bb4948246079649df8a6786a9146721f70784e9b5c154fbd9051
r-cran-mvtnorm=1.1-3-1+b1 site-library/mvtnorm/doc/MVT_Rnews.pdf 0caa34fb53315b2ddf143cd7c4f9dc13a167648963ca6f43bbba676e0033abc9
r-cran-vegan=2.6-4+dfsg-1 site-library/vegan/doc/diversity-vegan.pdf e653242bcabb9ce27e2f877b192f74a784eaa43ff031851a82626945a7dd96b5
";;
survival) files="
r-cran-survival=3.5-3-1 library/survival/doc/survival.pdf d8e4cac102d76e25b9e0e224eb262e7db542c351e0f81b9c1c3f3fcf0a81436c
r-cran-survival=3.5-3-1 library/survival/doc/compete.pdf 1d83a2c90440051bef67554f06c942e418645a07e56d44e7cb1c42ba7c40ba88
r-cran-survival=3.5-3-1 library/survival/doc/timedep.pdf 2ce226d9267a794376a42b7e0f3d93511c2229ed9a871ab73695d43dcaf8ef51
r-cran-survival=3.5-3-1 library/survival/doc/adjcurve.pdf d1858bbdf1d573d09f52249e1dc9b688e1c052d3c0bd54853279c139309d761d
r-cran-survival=3.5-3-1 library/survival/doc/concordance.pdf 081353813156f28af62bb67fbf2b4462d3370534fefd80ec360d11426cdbc924
r-cran-survival=3.5-3-1 library/survival/doc/validate.pdf bad9bc7ef9940a735197e2f5bf0d353690c99a3dd1af5da7aa13c48b93ce5d8b
r-cran-survival=3.5-3-1 library/survival/doc/population.pdf cdd08e4799b56d68d1da1368e9e6ab4094da0cc79792a3563b6af95582c14cd9
r-cran-survival=3.5-3-1 library/survival/doc/splines.pdf 354dcaf2fbf3d37f247752810b1687fb7cde5c35a5baedb67652ed828742be22
r-cran-survival=3.5-3-1 library/survival/doc/discrim.pdf 78678cc447f65b84309a2d00868d94bc0185046447f2ca3de1c52ac87cc4c4bd
r-cran-survival=3.5-3-1 library/survival/doc/approximate.pdf ccddadd9b587b9fb4ab0ed17268090ab81a15f695ef4d3e83f865315747ad19c
r-cran-survival=3.5-3-1 library/survival/doc/tiedtimes.pdf decffd5798b20d3a5fb67381353d42644a0e759f7e48710ba54843f80995cafe
";;
*) usage;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
packages=$(awk 'NF {print $1}' <<<"$files" | sort -u)
# apt-get download writes into the current folder; a fresh temporary one keeps old .debs out.
(cd "$work" && apt-get download -q $packages)
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done

mkdir -p "$target"
while read -r package path sum; do
  [ -n "$package" ] || continue
  cp "$work/root/usr/lib/R/$path" "$target/"
  name=$(basename "$path")
  got=$(sha256sum "$target/$name" | cut -d' ' -f1)
  # A rebuilt package may differ in embedded dates only; say so rather than stop, since the
  # questions' keys are checked against the text (check_keys.py), not the bytes.
  [ "$got" = "$sum" ] || echo "warning: $name differs from the PDF the questions were written from" >&2
done <<<"$files"
echo "$(ls "$target" | wc -l) PDFs in $target"
