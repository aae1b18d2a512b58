"""The project being edited: a form per section of the project file, the editor
that holds them, and the document (its file, its changes, its validation).

``project_editor.py`` shows one tab per section (``section_bar.py``: the tabs as rows
of buttons) and reads the forms into the project file's dict; ``project_document.py``
knows the file, whether it changed, and validates it, and ``project_actions.py`` holds the
File menu's actions on it; a problem shows on the widget
that owns the bad value (``problem_marks.py``) and in the list (``problems_panel.py``);
``project_summary.py`` says what will run, a line per section. The forms
(``*_form.py``, ``layer_card.py``, ``tf_config_editor.py`` with ``tf_config_table.py``,
``hosts_panel.py``: how each TF_CONFIG host is reached)
are generated from the engine's models where they can be: ``auto_form.py`` lays out a
list of fields, ``field_editors.py`` makes one editor per field.
"""
