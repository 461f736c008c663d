# Result views and figure export (tests/widgets/test_views*.cpp).
attnscope_add_widget_test(test_views test_views.cpp)
target_link_libraries(test_views PRIVATE Qt6::Test)
target_compile_definitions(test_views PRIVATE ATTNSCOPE_DOCS_DIR="${PROJECT_SOURCE_DIR}/docs")
# Curves and model overview views on real sweeps; the maps view's square panels.
attnscope_add_widget_test(test_curves test_curves.cpp)
target_link_libraries(test_curves PRIVATE Qt6::Test)
target_compile_definitions(test_curves PRIVATE ATTNSCOPE_DOCS_DIR="${PROJECT_SOURCE_DIR}/docs")
# The maps view at large N: reduced images, full resolution when zoomed in, repaint timings (printed).
attnscope_add_widget_test(test_maps_large test_maps_large.cpp)
target_link_libraries(test_maps_large PRIVATE Qt6::Test)
