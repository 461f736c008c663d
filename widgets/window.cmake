# The main window, its docks (data browser, selection, mechanisms), sessions and the export dialog.
target_sources(attnscope_widgets PRIVATE
  main_window.cpp main_window.h
  data_browser.cpp data_browser.h
  selection_panel.cpp selection_panel.h
  mechanism_panel.cpp mechanism_panel.h
  session.cpp session.h
  export_dialog.cpp export_dialog.h
  sweep_dialog.cpp sweep_dialog.h)
