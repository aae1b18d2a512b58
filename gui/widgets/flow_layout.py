"""A row of widgets that wraps onto more lines when its width is short, as words do.

A QHBoxLayout of buttons is as wide as all its buttons: in a narrowed dock the row
held the whole page wider than its scroll area, and a horizontal scrollbar covered
the page's last row. A :class:`FlowLayout` asks only for its widest item's width and
puts the items that do not fit on the next line; its height follows its width
(``heightForWidth``), which QScrollArea and the box layouts around it honour.
"""

from __future__ import annotations

from PySide6.QtCore import QMargins, QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QLayout, QLayoutItem, QStyle, QWidget


class FlowLayout(QLayout):
    """Items left to right at their size hints, wrapped at the layout's width; on each
    line, the width left over goes to the items that grow sideways (an Expanding
    horizontal size policy), as in a box layout.

    ``spacing`` (pixels, both ways) defaults to the style's spacing between widgets;
    ``margins`` default to none, as a row inside another layout has.
    """

    def __init__(
        self, parent: QWidget | None = None, spacing: int = -1, margins: QMargins | None = None
    ) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._spacing = spacing
        self.setContentsMargins(margins if margins is not None else QMargins())

    # --- QLayout's item list -------------------------------------------------------------

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    # --- sizes ---------------------------------------------------------------------------

    def spacing(self) -> int:
        """The gap between items: the one given, else the style's between push buttons."""
        if self._spacing >= 0:
            return self._spacing
        widget = self.parentWidget()
        style = widget.style() if widget is not None else None
        if style is None:
            return 6
        return style.pixelMetric(QStyle.PixelMetric.PM_LayoutHorizontalSpacing, None, widget)

    def expandingDirections(self) -> Qt.Orientation:
        """Horizontal when an item grows sideways: the row then takes the width it is given."""
        expanding = any(
            item.expandingDirections() & Qt.Orientation.Horizontal for item in self._items
        )
        return Qt.Orientation.Horizontal if expanding else Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._place(QRect(0, 0, width, 0), move=False)

    def minimumSize(self) -> QSize:
        """The widest item: every other item can go on a line of its own."""
        size = QSize()
        for item in self._items:
            size = size.expandedTo(item.minimumSize())
        margins = self.contentsMargins()
        return size + QSize(margins.left() + margins.right(), margins.top() + margins.bottom())

    def sizeHint(self) -> QSize:
        """Every item on one line."""
        visible = [item for item in self._items if not item.isEmpty()]
        width = sum(item.sizeHint().width() for item in visible)
        width += self.spacing() * max(len(visible) - 1, 0)
        height = max((item.sizeHint().height() for item in visible), default=0)
        margins = self.contentsMargins()
        return QSize(
            width + margins.left() + margins.right(), height + margins.top() + margins.bottom()
        )

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._place(rect, move=True)

    def _place(self, rect: QRect, move: bool) -> int:
        """Lays the items out in ``rect`` (only measures unless ``move``); the height used.

        Each line's items are centred on the line's height, so a label sits level with
        the combo box beside it."""
        area = rect.marginsRemoved(self.contentsMargins())
        gap = self.spacing()
        lines: list[list[tuple[QLayoutItem, QSize]]] = [[]]
        x = area.x()
        for item in self._items:
            if item.isEmpty():  # a hidden widget takes no place
                continue
            size = item.sizeHint().boundedTo(QSize(area.width(), item.sizeHint().height()))
            size = size.expandedTo(item.minimumSize())
            if lines[-1] and x + size.width() > area.right() + 1:
                lines.append([])
                x = area.x()
            lines[-1].append((item, size))
            x += size.width() + gap
        y = area.y()
        for line in lines:
            height = max((size.height() for _, size in line), default=0)
            used = sum(size.width() for _, size in line) + gap * (len(line) - 1)
            growing = [
                bool(item.expandingDirections() & Qt.Orientation.Horizontal) for item, _ in line
            ]
            share, extra = divmod(max(area.width() - used, 0), max(sum(growing), 1))
            x = area.x()
            for (item, size), grows in zip(line, growing, strict=True):
                width = size.width()
                if grows:
                    width += share + (1 if extra > 0 else 0)
                    extra -= 1
                if move:
                    top = y + (height - size.height()) // 2
                    item.setGeometry(QRect(QPoint(x, top), QSize(width, size.height())))
                x += width + gap
            y += height + gap
        used = y - gap if any(lines) else y
        return used - rect.y() + self.contentsMargins().bottom()
