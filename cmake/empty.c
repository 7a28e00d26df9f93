/* libgeotrain.so is assembled from the module archives; this file only gives CMake a source. */
typedef int gt_empty_translation_unit_t;
