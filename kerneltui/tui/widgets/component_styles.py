"""Rich styles of a Line API widget's component classes, combined once per tuple of class names.

Painting a timeline asks for the same few combinations thousands of times a frame; Textual's
``get_component_rich_style`` is too slow for that, so each combination is built once and kept
until the stylesheet changes (the widget's ``notify_style_update`` calls ``forget_styles``).
"""

from __future__ import annotations

from rich.style import Style


class ComponentStyles:
    _styles: dict[tuple[str, ...], Style]

    def _style(self, classes: tuple[str, ...]) -> Style:
        styles = self.__dict__.setdefault("_styles", {})
        style = styles.get(classes)
        if style is None:
            style = self.rich_style
            for name in classes:
                style += self.get_component_rich_style(name, partial=True)
            styles[classes] = style
        return style

    def forget_styles(self) -> None:
        self._styles = {}
