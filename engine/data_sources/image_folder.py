"""A folder with one subfolder of images per class (``image_dataset_from_directory``'s
layout), streamed from disk: each image is decoded, resized to the model's input and
scaled to [0, 1] as its batch is prepared (``engine/tf/data_sources/image_folder.py``)."""

from __future__ import annotations

from ..config import ImageFolderData, ModelConfig, Project
from ..problems import Problem
from .base import ClassFolders, DataSource, ScriptData
from .folders import IMAGE_EXTENSIONS, FolderError, FolderScanner, class_label_problems
from .script_lines import definitions, engine_tf_source, folder_lines, label_call

IMAGE_CHANNELS = {"grayscale": 1, "rgb": 3}


def image_channels(data: ImageFolderData, model: ModelConfig) -> int:
    """Channels each decoded image has: the color mode's, or the model input's last axis."""
    if data.color_mode != "auto":
        return IMAGE_CHANNELS[data.color_mode]
    return model.input_shape[-1]


class ImageFolderSource(DataSource[ImageFolderData]):
    class_folders = ClassFolders("images", IMAGE_EXTENSIONS)
    preview = "images"

    def form_start(self) -> dict[str, object]:
        return {"path": ""}

    def shape_problems(
        self, data: ImageFolderData, project: Project, loc: tuple[str, ...]
    ) -> list[Problem]:
        """Images are resized to the model's input, so the input must name a size and a color
        mode; their labels are class numbers, so the loss must be a crossentropy."""
        problems = []
        shape = project.model.input_shape
        if len(shape) != 3 or shape[-1] not in IMAGE_CHANNELS.values():
            problems.append(
                Problem(
                    ("model", "input_shape"),
                    f"image data needs [height, width, channels] with 1 (grayscale) or 3 (rgb) "
                    f"channels, not {shape}",
                )
            )
        elif data.color_mode != "auto" and IMAGE_CHANNELS[data.color_mode] != shape[-1]:
            problems.append(
                Problem(
                    (*loc, "color_mode"),
                    f"{data.color_mode} images have {IMAGE_CHANNELS[data.color_mode]} channel(s) "
                    "but "
                    f"model.input_shape {shape} takes {shape[-1]}; choose auto or change the shape",
                )
            )
        return problems + class_label_problems(project, "an image folder")

    def unreadable_problems(
        self, data: ImageFolderData, where: str, scanner: FolderScanner
    ) -> tuple[list[Problem], list[str]]:
        """Its files cut short, empty or no image, as the run would meet them: a problem
        when ``on_bad_file`` is fail, a note when it skips."""
        try:
            summary = scanner(data.path, IMAGE_EXTENSIONS)
        except FolderError:
            return [], []  # project_folder_problems names it
        if not summary.unreadable:
            return [], []
        (path, why), count = summary.unreadable[0], summary.unreadable_count
        if data.on_bad_file == "fail":
            others = f" ({count - 1} more unreadable)" if count > 1 else ""
            loc = (*where.split("."), "path")
            problem = Problem(
                loc,
                f"{path} {why}{others}; replace or remove it, or set {where}.on_bad_file to skip",
            )
            return [problem], []
        more = f" and {count - 1} more" if count > 1 else ""
        note = (
            f"{where}.path: {count} unreadable image(s) will be skipped "
            f"({where}.on_bad_file is skip): {path} {why}{more}"
        )
        return [], [note]

    def script(self, data: ImageFolderData, project: Project) -> ScriptData:
        """The folder's images, decoded as the engine decodes them for training."""
        height, width = project.model.input_shape[:2]
        channels = image_channels(data, project.model)
        notes = []
        if data.on_bad_file == "skip":
            notes = [
                "# data.on_bad_file is skip: the project's runs leave out images that cannot be",
                "# decoded. This script does not look for them first: a damaged image fails it.",
                "# Remove those files (a run's log names them) to train on the same images.",
            ]
        lines = [
            *folder_lines(data.path, project, IMAGE_EXTENSIONS, notes),
            *definitions(engine_tf_source("image_folder", "decode_pixels", "scale")),
            *definitions(engine_tf_source("class_folders", "encode_label")),
            "def load_example(path, label):",
            f'    """Decoded, resized to {height}x{width}, {channels} channel(s), scaled to '
            '[0, 1]."""',
            "    # Resizing an image that already has the model's size leaves every pixel as "
            "it is.",
            f"    image = scale(decode_pixels(tf.io.read_file(path), {height}, {width}, "
            f"{channels}))",
            f"    return image, {label_call(project)}",
            "",
            "",
            "dataset = tf.data.Dataset.from_tensor_slices((files, np.asarray(labels, np.int32)))",
        ]
        augment = _augmentation_lines(data, project.training.seed) if data.augments else []
        imports = {"os", "math"} if data.augments else {"os"}
        return ScriptData(lines, imports, load_after_shuffle=True, after_repeat=augment)


SOURCE = ImageFolderSource()


def _augmentation_lines(data: ImageFolderData, seed: int) -> list[str]:
    return [
        *definitions(engine_tf_source("image_folder", "augment_images", "_rotate", "_crop")),
        "def augment(step, batch):",
        '    """Training batches only; the draw depends on the seed and the batch number."""',
        "    images, labels = batch",
        f"    images = augment_images(images, step, {seed}, flip={data.flip!r}, "
        f"rotation={data.rotation!r}, crop={data.crop!r})",
        "    return images, labels",
        "",
        "",
        "# Batches numbered from 0 across epochs: the number seeds the batch's augmentation.",
        "dataset = dataset.enumerate().map(augment, num_parallel_calls=tf.data.AUTOTUNE)",
    ]
