"""A folder with one subfolder of ``.txt`` files per class (``text_dataset_from_directory``'s
layout): each file one example, turned into word numbers by a vocabulary learned from the
training examples only (``engine/tf/data_sources/text_folder.py``)."""

from __future__ import annotations

from ..config import Project, TextFolderData
from ..problems import Problem
from .base import ClassFolders, DataSource, ScriptData
from .folders import TEXT_EXTENSIONS, class_label_problems
from .script_lines import definitions, engine_tf_source, folder_lines, label_call


class TextFolderSource(DataSource[TextFolderData]):
    class_folders = ClassFolders("text files", TEXT_EXTENSIONS)
    learned_from_training = True
    preview = "texts"

    def form_start(self) -> dict[str, object]:
        return {"path": ""}

    def shape_problems(
        self, data: TextFolderData, project: Project, loc: tuple[str, ...]
    ) -> list[Problem]:
        """Each text becomes ``sequence_length`` word numbers below ``vocabulary_size``."""
        problems = []
        if project.model.input_shape != [data.sequence_length]:
            problems.append(
                Problem(
                    ("model", "input_shape"),
                    f"text data gives {data.sequence_length} word numbers per example "
                    f"({'.'.join(loc)}.sequence_length); the input_shape must be "
                    f"[{data.sequence_length}], not {project.model.input_shape}",
                )
            )
        for index, layer in enumerate(project.model.layers):
            input_dim = getattr(layer, "input_dim", None)
            if getattr(layer, "kind", None) == "embedding" and input_dim < data.vocabulary_size:
                problems.append(
                    Problem(
                        ("model", "layers", index, "input_dim"),
                        f"is {input_dim}, but word numbers run up to "
                        f"{data.vocabulary_size - 1} ({'.'.join(loc)}.vocabulary_size "
                        f"{data.vocabulary_size}); make it at least {data.vocabulary_size}",
                    )
                )
        return problems + class_label_problems(project, "a text folder")

    def script(self, data: TextFolderData, project: Project) -> ScriptData:
        """The folder's texts as word numbers, with a vocabulary learned from the training
        files."""
        length = data.sequence_length
        lines = [
            *folder_lines(data.path, project, TEXT_EXTENSIONS, []),
            *definitions(
                engine_tf_source("text_folder", "ADAPT_BATCH", "adapt_vectorizer", "read_words")
            ),
            *definitions(engine_tf_source("class_folders", "encode_label")),
            "# The vocabulary comes from the training files only, never from held-out ones.",
            f"vectorize = adapt_vectorizer(tuple(files), {data.vocabulary_size}, {length})",
            "",
            "",
            "def load_example(path, label):",
            f'    """The file\'s first {length} word numbers (0 pads, 1 is an unknown word)."""',
            f"    return read_words(vectorize, path, {length}), {label_call(project)}",
            "",
            "",
            "dataset = tf.data.Dataset.from_tensor_slices((files, np.asarray(labels, np.int32)))",
        ]
        return ScriptData(lines, {"os"}, load_after_shuffle=True)


SOURCE = TextFolderSource()
