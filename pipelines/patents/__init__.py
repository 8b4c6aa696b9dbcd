"""Patent claim-tree pipeline: claims found, split, linked and checked, with every part pointing
back into the document.

Modules, in the order the analysis runs:
- `text`: the normalised, same-length view of the text (full-width forms, page furniture blanked);
- `section`: where the claims section starts and ends;
- `splitter`: the claims, their numbers and prosecution status;
- `references`: reference phrases ("any one of claims 1 to 5", "如权利要求1至5中任一项所述");
- `structure`: category, preamble, transitional phrase, body elements;
- `antecedent`: "the X" / "said X" / "所述X" without antecedent basis;
- `findings`: the findings over the claim set;
- `tree`: the networkx graph, the nested trees, the terminal and Graphviz renderings;
- `analyse`: the whole analysis, Document -> `PatentResult` (`model`);
- `pipeline`: `PatentsPipeline` and the helpers the CLI and UI call.
"""
