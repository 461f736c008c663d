target_sources(attnscope_widgets PRIVATE main_window.cpp main_window.h)
