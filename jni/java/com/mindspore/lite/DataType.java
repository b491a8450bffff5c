package com.mindspore.lite;

/** MindSpore's TypeId values, as returned by {@link MSTensor#getDataType()}. */
public final class DataType {
    public static final int kTypeUnknown = 0;
    public static final int kNumberTypeBool = 30;
    public static final int kNumberTypeInt8 = 32;
    public static final int kNumberTypeInt16 = 33;
    public static final int kNumberTypeInt32 = 34;
    public static final int kNumberTypeInt64 = 35;
    public static final int kNumberTypeUInt8 = 37;
    public static final int kNumberTypeUInt16 = 38;
    public static final int kNumberTypeUInt32 = 39;
    public static final int kNumberTypeUInt64 = 40;
    public static final int kNumberTypeFloat16 = 42;
    public static final int kNumberTypeFloat32 = 43;
    public static final int kNumberTypeFloat64 = 44;

    private DataType() {
    }
}
