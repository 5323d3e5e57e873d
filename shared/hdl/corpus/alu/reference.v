// Reference ALU: one adder serves add, subtract and compare; a table of results picks the output.
module alu (
    input  wire [2:0] op,
    input  wire [7:0] a,
    input  wire [7:0] b,
    output wire [7:0] y,
    output wire       zero
);
    wire       subtract = (op != 3'd0);
    wire [7:0] operand  = subtract ? ~b : b;
    wire [8:0] sum      = {1'b0, a} + {1'b0, operand} + {8'd0, subtract};
    // a < b (signed): the sign of a - b, corrected when the subtraction overflows.
    wire       overflow = (a[7] != b[7]) && (sum[7] != a[7]);
    wire       less     = sum[7] ^ overflow;

    wire [7:0] results [0:7];
    assign results[0] = sum[7:0];
    assign results[1] = sum[7:0];
    assign results[2] = a & b;
    assign results[3] = a | b;
    assign results[4] = a ^ b;
    assign results[5] = a << b[2:0];
    assign results[6] = a >> b[2:0];
    assign results[7] = {7'd0, less};

    assign y    = results[op];
    assign zero = ~|y;
endmodule
