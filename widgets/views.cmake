# The result views and figure export (owned by the views work; included by widgets/CMakeLists.txt).
target_sources(attnscope_widgets PRIVATE
  views.h export.h plot_style.h plot_style.cpp
  maps_view.cpp query_view.cpp spectrum_view.cpp entropy_view.cpp mixing_view.cpp metrics_view.cpp
  views.cpp export.cpp)
# Views of sweeps (curves.h): curves against N or M, and the layers x heads model overview.
target_sources(attnscope_widgets PRIVATE curves.h curves_view.cpp overview_view.cpp)
