# Copyright 2026 The personalized-rewardbench authors. Licensed under the Apache License 2.0.
"""`datasets` builder for Personalized RewardBench.

datasets >= 4 no longer runs loading scripts from `load_dataset`, so releases are Parquet files plus
`configs:` YAML in their README. This builder is used directly, to build and verify a release:

    builder = PersonalizedRewardBench(config_name="Art_and_Entertainment", data_dir="path/to/release")
    builder.download_and_prepare()
    rows = builder.as_dataset(split="test")

`data_dir` may be a release folder (`data/<Config>/test-*.parquet`) or a folder in the upstream
layout (`<Config>/test-*.parquet`). A folder of pairs made by `prbench construct` may hold a
`train` or `validation` split instead (`<Config>/train-*.parquet`): training data, not the benchmark.
Without `data_dir` the builder reads the folder it sits in when that holds data (a copy inside a
release), else downloads the Parquet files of `_HUB_REPO`.
"""

import glob
import os

import datasets
import pyarrow as pa
import pyarrow.parquet as pq

_CITATION = """\
@misc{ma2026personalizedrewardbench,
  title         = {Personalized RewardBench},
  author        = {Ma, Qiyao and others},
  year          = {2026},
  eprint        = {2604.07343},
  archivePrefix = {arXiv}
}
"""

_DESCRIPTION = """\
Personalized RewardBench asks whether a reward model prefers the answer that fits this user. Each item
holds a question, the asking user's past posts, a narrative and rubric aspects (the answer key, never a
model input), and two answers of similar quality: `chosen` follows the user's aspects, `rejected`
violates them.
"""

_HOMEPAGE = "https://arxiv.org/abs/2604.07343"
_LICENSE = "apache-2.0"
_HUB_REPO = "QiyaoMa/Personalized-RewardBench"
_URL_TEMPLATE = "https://huggingface.co/datasets/" + _HUB_REPO + "/resolve/main/{config}/test-00000-of-00001.parquet"

_SUBSETS = (
    "Art_and_Entertainment",
    "Lifestyle_and_Personal_Development",
    "Society_and_Culture",
)
_SUBSET_COLUMN = "subset"
_SPLITS = ("test", "train", "validation")

_FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "question": datasets.Value("string"),
        "profile": datasets.List(
            {"id": datasets.Value("string"), "category": datasets.Value("string"), "text": datasets.Value("string")}
        ),
        "rubric_aspects": datasets.List(
            {
                "aspect": datasets.Value("string"),
                "evidence": datasets.Value("string"),
                "reason": datasets.Value("string"),
            }
        ),
        "narrative": datasets.Value("string"),
        "category": datasets.Value("string"),
        "chosen": datasets.Value("string"),
        "rejected": datasets.Value("string"),
    }
)


class PersonalizedRewardBenchConfig(datasets.BuilderConfig):
    """One subset, or `default` for all subsets with an added `subset` column."""

    def __init__(self, subsets, **kwargs):
        super().__init__(version=datasets.Version("1.0.0"), **kwargs)
        self.subsets = tuple(subsets)


class PersonalizedRewardBench(datasets.ArrowBasedBuilder):
    """Personalized RewardBench: one `test` split per subset."""

    BUILDER_CONFIGS = [
        PersonalizedRewardBenchConfig(name=subset, subsets=[subset], description=f"The {subset} subset.")
        for subset in _SUBSETS
    ] + [
        PersonalizedRewardBenchConfig(
            name="default", subsets=_SUBSETS, description="All subsets, with a `subset` column."
        )
    ]
    DEFAULT_CONFIG_NAME = "default"

    def _features(self):
        if self.config.name == "default":
            return datasets.Features({**_FEATURES, _SUBSET_COLUMN: datasets.Value("string")})
        return _FEATURES

    def _info(self):
        return datasets.DatasetInfo(
            description=_DESCRIPTION,
            features=self._features(),
            homepage=_HOMEPAGE,
            license=_LICENSE,
            citation=_CITATION,
        )

    def _local_files(self, folder, subset, split="test"):
        for pattern in (
            os.path.join(folder, "data", subset, split + "-*.parquet"),
            os.path.join(folder, subset, split + "-*.parquet"),
        ):
            files = sorted(glob.glob(pattern))
            if files:
                return files
        return []

    def _split_generators(self, dl_manager):
        folder = self.config.data_dir or os.path.dirname(os.path.abspath(__file__))
        local = []
        for split in _SPLITS:
            split_files = {subset: self._local_files(folder, subset, split) for subset in self.config.subsets}
            if all(split_files.values()):
                local.append(datasets.SplitGenerator(name=split, gen_kwargs={"files": split_files}))
        if local:
            return local
        files = {subset: self._local_files(folder, subset) for subset in self.config.subsets}
        if not all(files.values()):
            if self.config.data_dir:
                missing = [subset for subset, found in files.items() if not found]
                raise FileNotFoundError(f"{self.config.data_dir}: no test-*.parquet for {', '.join(missing)}")
            urls = {subset: [_URL_TEMPLATE.format(config=subset)] for subset in self.config.subsets}
            files = dl_manager.download(urls)
        return [datasets.SplitGenerator(name=datasets.Split.TEST, gen_kwargs={"files": files})]

    def _generate_tables(self, files):
        features = self._features()
        for subset in self.config.subsets:
            for file_index, path in enumerate(files[subset]):
                table = pq.read_table(path, columns=list(_FEATURES))
                if _SUBSET_COLUMN in features:
                    table = table.append_column(_SUBSET_COLUMN, pa.array([subset] * table.num_rows, pa.string()))
                yield f"{subset}_{file_index}", table.cast(features.arrow_schema)
